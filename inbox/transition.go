package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// state is what the journal holds for one decision.
type state struct {
	p      *plexus.Pending
	rec    *plexus.DecisionFile
	grants map[string]*plexus.Grant // capability → the agent's grant row, for an approved decision
	// pinned is true for an approved definition whose pin this decision
	// still sets.
	pinned bool
}

func (r *Reconciler) read(ctx context.Context, id string) (state, error) {
	var s state
	err := r.store.View(ctx, func(tx plexus.StateTx) error {
		s = state{}
		p, err := tx.Pending(id)
		if errors.Is(err, plexus.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		s.p = p
		rec, err := tx.DecisionFile(id)
		if err == nil {
			s.rec = rec
		} else if !errors.Is(err, plexus.ErrNotFound) {
			return err
		}
		if p.State != plexus.StateApproved {
			return nil
		}
		if c := p.Definition; c != nil {
			pins, err := tx.Pins(c.Source)
			if err != nil {
				return err
			}
			s.pinned = slices.ContainsFunc(pins, func(pin plexus.Pin) bool { return pin.EntryID == c.EntryID && pin.PendingID == p.ID })
			return nil
		}
		s.grants = map[string]*plexus.Grant{}
		for _, it := range p.Items {
			g, err := tx.Grant(p.AgentID, it.CapabilityID)
			if errors.Is(err, plexus.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			s.grants[it.CapabilityID] = g
		}
		return nil
	})
	return s, err
}

// one brings decision id's file in line with the journal.
func (r *Reconciler) one(ctx context.Context, id string) error {
	s, err := r.read(ctx, id)
	if err != nil {
		return err
	}
	here, blind := r.locate(id)
	if len(here) > 1 {
		here = withoutVanished(here)
	}
	if s.p == nil {
		delete(r.missing, id)
		return r.unknown(ctx, id, here)
	}
	here, stale, err := r.setAsideStale(ctx, &s, here)
	if err != nil {
		return err
	}
	if len(here) > 1 {
		r.reportConflict(id, s.p, here)
		return nil
	}
	var c *copyOf
	if len(here) == 1 {
		c = here[0]
	}
	if c == nil && blind {
		return nil // a folder could not be read: absence proves nothing
	}
	if c != nil {
		delete(r.missing, id)
	}
	return r.apply(ctx, id, s, c, stale)
}

// withoutVanished drops the copies gone since locate saw them: a move made
// while locate looked (a file read in inbox/, then found again in active/)
// shows one file in two folders.
func withoutVanished(here []*copyOf) []*copyOf {
	return slices.DeleteFunc(here, func(c *copyOf) bool {
		_, err := os.Lstat(c.path)
		return errors.Is(err, os.ErrNotExist)
	})
}

// setAsideStale takes out of here the copies that are the daemon's own
// leftovers, to be removed once the decision is dealt with, and returns
// what remains and those.
func (r *Reconciler) setAsideStale(ctx context.Context, s *state, here []*copyOf) (rest, stale []*copyOf, err error) {
	// Copies the daemon's last write replaced and was about to remove when
	// a crash stopped it are its own leftovers, whatever else is there.
	if s.rec != nil && len(s.rec.Prev) > 0 {
		here = slices.DeleteFunc(here, func(c *copyOf) bool {
			if slices.Contains(s.rec.Prev, plexus.FilePlace{Folder: c.folder, Sum: c.sum}) {
				stale = append(stale, c)
				return true
			}
			return false
		})
		if len(stale) == 0 {
			// All removed, as planned: forget them, so that the same bytes
			// put back by hand later are the owner's.
			rec := *s.rec
			rec.Prev = nil
			if err := r.record(ctx, rec); err != nil {
				return nil, nil, err
			}
			s.rec = &rec
		}
	}
	// The daemon's own unchanged file left behind while a copy sits in
	// another folder (a copy made by hand, or a crash between writing a
	// file's new place and removing its old one) is not a decision: the
	// other copy is. It is removed once that one is dealt with.
	if len(here) > 1 && s.rec != nil {
		here = slices.DeleteFunc(here, func(c *copyOf) bool {
			if c.folder == s.rec.Folder && c.sum == s.rec.Sum {
				stale = append(stale, c)
				return true
			}
			return false
		})
	}
	return here, stale, nil
}

// reportConflict tells the owner that p's file is in more than one folder.
func (r *Reconciler) reportConflict(id string, p *plexus.Pending, here []*copyOf) {
	where := make([]string, len(here))
	for i, c := range here {
		where[i] = c.folder + "/"
	}
	r.report(id, "conflict:"+strings.Join(where, ","), "inbox.conflict", plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, Target: id,
		Payload: map[string]any{"folders": where, "problem": "the decision's file is in more than one folder; keep one"}})
}

// apply brings the decision's file c (nil when there is none) in line with
// the pending or decided s, then removes the stale copies.
func (r *Reconciler) apply(ctx context.Context, id string, s state, c *copyOf, stale []*copyOf) error {
	var err error
	if s.p.State == plexus.StatePending {
		err = r.pending(ctx, s, c, stale)
	} else {
		err = r.decided(ctx, s, c, stale)
	}
	var nr *platform.NotRegularError
	if errors.As(err, &nr) {
		// The file belongs where something not a regular file holds its
		// name (journaled by locate, or by the next look if it was put
		// there since). The journal's decision stands; its file waits
		// where it is until the owner removes what is in the way.
		r.log.Debug("inbox: a decision's file cannot be placed", "id", id, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	return r.drop(stale) // whatever path was taken, leftovers go (removeIf checks each)
}

// gone reports whether id's file has stayed missing for the grace period,
// starting the clock the first time it is seen missing.
func (r *Reconciler) gone(id string) bool {
	since, ok := r.missing[id]
	if !ok {
		r.missing[id] = time.Now()
		return false
	}
	if time.Since(since) < r.cfg.WithdrawGrace {
		return false
	}
	delete(r.missing, id)
	return true
}

// pending handles a decision still waiting for the owner.
func (r *Reconciler) pending(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p := s.p
	switch {
	case c == nil && s.rec == nil:
		// Never written (just put up, or a crash before the write).
		b, err := r.render(*p, "", "", Notes{})
		if err != nil {
			return err
		}
		if err := r.put(ctx, p.ID, plexus.FolderInbox, b, nil); err != nil {
			return err
		}
		r.notify(*p)
		return nil
	case c == nil:
		if !r.gone(p.ID) {
			return nil
		}
		return r.settle(ctx, s, nil, stale, plexus.Decision{PendingID: p.ID, Withdraw: true, DecidedBy: r.cfg.Owner(), Via: plexus.ViaFile,
			Reason: r.absence(p.ID, plexus.FolderInbox)})
	}
	switch c.folder {
	case plexus.FolderInbox:
		if s.rec == nil {
			// Written before a crash kept the record from being made; if
			// the bytes differ, the owner has edited it since.
			b, err := r.render(*p, "", "", Notes{})
			if err != nil {
				return err
			}
			return r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: plexus.FolderInbox, Sum: Sum(b)})
		}
		if c.sum != s.rec.Sum {
			return r.annotateBroken(p, c)
		}
		delete(r.recheck, p.ID)
		return nil
	case plexus.FolderActive:
		return r.approve(ctx, s, c, stale)
	case plexus.FolderRejected:
		f, _ := Parse(c.b)
		d := plexus.Decision{PendingID: p.ID}
		if f != nil {
			d.Reason = f.Reason
		}
		d.DecidedBy, d.Via = r.who(f)
		return r.settle(ctx, s, c, stale, d)
	default: // archive: put away undecided
		f, _ := Parse(c.b)
		d := plexus.Decision{PendingID: p.ID, Withdraw: true, Reason: "its file was moved to archive/"}
		d.DecidedBy, d.Via = r.who(f)
		return r.settle(ctx, s, c, stale, d)
	}
}

// annotateBroken writes the problem into an owner-edited inbox file that no
// longer reads as a decision file, so the owner sees it before moving it.
// The owner's text is kept; the write is not recorded as the daemon's, so
// the file stays the owner's. Only a file that has stayed unchanged for the
// grace period is touched (an editor that writes in place may be half-way
// through, and replacing the file then would lose the rest of the save),
// and only while it still holds what was read.
func (r *Reconciler) annotateBroken(p *plexus.Pending, c *copyOf) error {
	_, err := Parse(c.b)
	if err == nil {
		delete(r.recheck, p.ID)
		return nil
	}
	if r.settling(p.ID, c) {
		return nil
	}
	note := "this file cannot be read as it stands, so moving it would approve nothing: " + err.Error()
	b := Annotate(c.b, note)
	if bytes.Equal(b, c.b) {
		return nil
	}
	if cur, rerr := ReadFile(c.path); rerr != nil || Sum(cur) != c.sum {
		return nil // changed again meanwhile: the next look sees the new text
	}
	if err := WriteAtomic(filepath.Dir(c.path), filepath.Base(c.path), b); err != nil {
		return err
	}
	r.report(p.ID, "unreadable:"+err.Error(), "inbox.unreadable", plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID,
		Target: p.ID, Payload: map[string]any{"folder": c.folder, "problem": note}})
	return nil
}

// settling reports whether c changed less than the grace period ago, and if
// so arranges for another look once it has been quiet that long: a file that
// does not parse may be one still being written.
func (r *Reconciler) settling(id string, c *copyOf) bool {
	fi, err := os.Lstat(c.path)
	if err != nil {
		return false
	}
	if quiet := fi.ModTime().Add(r.cfg.WithdrawGrace); time.Now().Before(quiet) {
		r.recheck[id] = quiet
		return true
	}
	delete(r.recheck, id)
	return false
}

// who says who decided by moving f: `plexus approve|reject` and the
// console write `decided_by` and `via: cli` or `via: console` before their
// move; a move by hand is the owner's, via file.
func (r *Reconciler) who(f *File) (by, via string) {
	if f != nil && (f.Via == plexus.ViaCLI || f.Via == plexus.ViaConsole) {
		if by := oneLine(f.DecidedBy); by != "" {
			return capRunes(by, 120), f.Via
		}
	}
	return r.cfg.Owner(), plexus.ViaFile
}

// approve applies a file moved into active/.
func (r *Reconciler) approve(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p := s.p
	f, err := Parse(c.b)
	if err != nil && r.settling(p.ID, c) {
		return nil // perhaps still being written (cp, an editor saving in place)
	}
	if err != nil {
		// Broken: nothing is approved, and the owner's text is kept, with
		// the problem written into it, back in inbox/.
		note := "this file could not be read, so nothing was approved: " + err.Error()
		return r.refuse(ctx, s, c, stale, Annotate(c.b, note), note)
	}
	n, err := Changes(*p, f)
	var we *WideningError
	switch {
	case errors.As(err, &we) && we.Forged():
		// A file that claims another decision is evidence of tampering:
		// the decision it was put up as is denied, fail closed, and the
		// file is kept as it was, with the reason, in rejected/.
		note := we.Note()
		if _, err := r.dec.Decide(ctx, plexus.Decision{PendingID: p.ID, DecidedBy: plexus.ActorSystem, Via: plexus.ViaSystem,
			Reason: "its decision file was altered to claim another decision"}); err != nil {
			return r.decideFailed(ctx, s, c, stale, err)
		}
		return r.put(ctx, p.ID, plexus.FolderRejected, Annotate(c.b, note), append(stale, c),
			&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.forged", Target: p.ID,
				Payload: map[string]any{"folder": c.folder, "problem": note}})
	case err != nil:
		note := err.Error()
		if we != nil {
			note = we.Note()
		}
		b, rerr := r.render(*p, note, "", f.Notes)
		if rerr != nil {
			return rerr
		}
		return r.refuse(ctx, s, c, stale, b, note)
	}
	d := plexus.Decision{PendingID: p.ID, Approve: true, Reason: n.Reason}
	d.DecidedBy, d.Via = r.who(f)
	if n.Narrowed() {
		for _, it := range n.Items {
			w := it.TrustWindow
			d.Items = append(d.Items, plexus.ItemDecision{CapabilityID: it.CapabilityID, Verbs: it.Verbs, TrustWindow: &w, Constraint: it.Constraint})
		}
	}
	return r.settle(ctx, s, c, stale, d)
}

// settle applies d through the gateway and puts the decided file where it
// now belongs.
func (r *Reconciler) settle(ctx context.Context, s state, c *copyOf, stale []*copyOf, d plexus.Decision) error {
	if _, err := r.dec.Decide(ctx, d); err != nil {
		return r.decideFailed(ctx, s, c, stale, err)
	}
	// Decide touched the decision; place its file now rather than on the
	// next pass, so that a move is answered at once.
	return r.one(ctx, s.p.ID)
}

// decideFailed handles a decision the gateway refused. Decided meanwhile
// through another channel: the next look places the file. Refused (the
// request expired, a capability is gone, the narrowing was not one): the
// file goes back to inbox/ saying why. Anything else is retried.
func (r *Reconciler) decideFailed(ctx context.Context, s state, c *copyOf, stale []*copyOf, err error) error {
	var pe *plexus.Error
	if !errors.As(err, &pe) || (pe.Code != plexus.CodeConflict && pe.Code != plexus.CodeInvalidRequest) {
		return err
	}
	now, rerr := r.read(ctx, s.p.ID)
	if rerr != nil {
		return rerr
	}
	if now.p == nil || now.p.State != plexus.StatePending {
		return r.one(ctx, s.p.ID)
	}
	if c == nil {
		// A withdrawal the gateway refused: the request expired a moment
		// ago and the sweep will close it.
		r.log.Debug("inbox: withdrawal not applied", "id", s.p.ID, "err", err)
		return nil
	}
	note := "this decision could not be applied, so nothing changed: " + pe.Message
	b := Annotate(c.b, note) // the owner's text, when it is not this decision's file
	if f, perr := Parse(c.b); perr == nil && f.ID == now.p.ID {
		if b, rerr = r.render(*now.p, note, "", f.Notes); rerr != nil {
			return rerr
		}
	}
	return r.refuse(ctx, now, c, stale, b, note)
}

// refuse puts b (the problem written into it) back in inbox/ in place of c,
// and journals why.
func (r *Reconciler) refuse(ctx context.Context, s state, c *copyOf, stale []*copyOf, b []byte, note string) error {
	return r.put(ctx, s.p.ID, plexus.FolderInbox, b, append(stale, c),
		&plexus.Activity{TraceID: s.p.TraceID, AgentID: s.p.AgentID, ActionType: "inbox.refused", Target: s.p.ID,
			Payload: map[string]any{"folder": c.folder, "problem": note}})
}

// decided handles a decision that is no longer pending: its file belongs
// in active/ while what it granted stands, in rejected/ when denied, and in
// archive/ otherwise. The owner removing an approved file from active/
// revokes it; any other move of a decided file is undone, with a note.
func (r *Reconciler) decided(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p, rec := s.p, s.rec
	want, ended := r.desired(s)
	if c == nil {
		return r.decidedWithoutFile(ctx, s, want, ended, stale)
	}
	delete(r.missing, p.ID) // whatever was missing is settled below

	ours := rec != nil && rec.Folder == c.folder // the daemon put it there
	// The file whose move into active/ approved this decision, not filed
	// yet, belongs wherever the decision now does: its grant may have ended
	// before it was filed (a crash between the decision and the filing,
	// then a later approval of the same capability; a once grant used at
	// once). It is not the owner moving a decided file.
	approvedBy := p.State == plexus.StateApproved && c.folder == plexus.FolderActive &&
		(rec == nil || rec.Folder == plexus.FolderInbox)
	switch {
	case c.folder == want && ours:
		// Settled. If the sum differs, the owner edited a decided file:
		// theirs to keep.
		return r.drop(stale)
	case c.folder == want, approvedBy:
		// The daemon's file, or the file whose move made this decision
		// (placed before a crash could record it): written as decided.
		b, err := r.redecided(s, c, ended)
		if err != nil {
			return err
		}
		return r.put(ctx, p.ID, want, b, append(stale, c))
	case p.SignIn != nil && p.State == plexus.StateApproved && !ours &&
		(c.folder == plexus.FolderArchive || c.folder == plexus.FolderRejected):
		// An approved sign-in left nothing to revoke (signing out is
		// `plexus mcp logout`): the owner put its file away, and there
		// it stays, as they left it.
		if err := r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: c.folder, Sum: c.sum}); err != nil {
			return err
		}
		return r.drop(stale)
	case p.State == plexus.StateApproved && want == plexus.FolderActive && !ours &&
		(c.folder == plexus.FolderArchive || c.folder == plexus.FolderRejected):
		return r.revoke(ctx, s, c, stale, "its file was moved from active/ to "+c.folder+"/")
	case ours:
		// The state changed through another channel (decided by the CLI or
		// the admin API, expired, used, revoked, its window ended): the
		// daemon moves its file.
		return r.moveOurs(ctx, s, c, want, ended, stale)
	default:
		// The owner moved a decided file somewhere it does not belong: a
		// decision is made once; moving its file again changes nothing.
		note := "this decision was already " + describeState(*p, ended) + "; moving its file to " + c.folder +
			"/ changes nothing (to grant it again, the agent asks again)"
		return r.put(ctx, p.ID, want, Annotate(c.b, note), append(stale, c),
			&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.refused", Target: p.ID,
				Payload: map[string]any{"folder": c.folder, "problem": note}})
	}
}

// decidedWithoutFile handles a decided decision with no file in any
// folder. An approved file gone from active/ revokes the decision once it
// has stayed gone for the grace period; a file never written, or decided
// elsewhere while it was away, is written where it belongs; one the owner
// deleted stays deleted.
func (r *Reconciler) decidedWithoutFile(ctx context.Context, s state, want, ended string, stale []*copyOf) error {
	p, rec := s.p, s.rec
	if rec != nil && rec.Folder == plexus.FolderActive && want == plexus.FolderActive {
		if !r.gone(p.ID) {
			return nil
		}
		if p.SignIn != nil {
			// Nothing to revoke: the owner deleted the file, and it stays deleted.
			return r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: "", Sum: rec.Sum})
		}
		return r.revoke(ctx, s, nil, stale, r.absence(p.ID, plexus.FolderActive))
	}
	delete(r.missing, p.ID) // whatever was missing is settled below
	switch {
	case rec == nil || rec.Folder == plexus.FolderInbox:
		// Never written, or decided elsewhere while its file was away.
		b, err := r.render(*p, "", ended, Notes{})
		if err != nil {
			return err
		}
		return r.put(ctx, p.ID, want, b, stale)
	case rec.Folder != "":
		// The owner deleted a decided file: it stays deleted.
		return r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: "", Sum: rec.Sum})
	}
	return nil
}

// moveOurs moves the daemon's own file c of decided s to want: rendered
// anew, or, when the owner edited it, annotated that the edits were not
// applied.
func (r *Reconciler) moveOurs(ctx context.Context, s state, c *copyOf, want, ended string, stale []*copyOf) error {
	p := s.p
	var b []byte
	var err error
	if c.sum == s.rec.Sum {
		b, err = r.render(*p, "", ended, Notes{})
	} else {
		b = Annotate(c.b, "this decision is now "+describeState(*p, ended)+"; your edits of this file were not applied")
	}
	if err != nil {
		return err
	}
	return r.put(ctx, p.ID, want, b, append(stale, c),
		&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.moved", Target: p.ID,
			Payload: map[string]any{"from": c.folder, "to": want, "why": describeState(*p, ended)}})
}

// redecided is the file of a decided decision that reached its folder: the
// rendering, unless the file cannot be read as this decision, in which case
// the owner's text is kept and annotated.
func (r *Reconciler) redecided(s state, c *copyOf, ended string) ([]byte, error) {
	if f, err := Parse(c.b); err == nil && f.ID == s.p.ID {
		return r.render(*s.p, "", ended, f.Notes)
	} else if err == nil {
		return Annotate(c.b, "this file claims decision "+f.ID+"; decision "+s.p.ID+" was "+describeState(*s.p, ended)), nil
	} else {
		return Annotate(c.b, "decision "+s.p.ID+" was "+describeState(*s.p, ended)+"; this file could not be read: "+err.Error()), nil
	}
}

// revoke revokes what an approved decision granted, because its file left
// active/: c is where the owner moved it (nil: deleted). A moved file is
// rewritten in archive/ saying so; a deleted one stays deleted.
func (r *Reconciler) revoke(ctx context.Context, s state, c *copyOf, stale []*copyOf, why string) error {
	if _, err := r.dec.RevokeDecision(ctx, s.p.ID, r.cfg.Owner(), plexus.ViaFile, "revoked by the owner: "+why); err != nil {
		var pe *plexus.Error
		if !errors.As(err, &pe) || pe.Code != plexus.CodeConflict {
			return err
		}
	}
	now, err := r.read(ctx, s.p.ID)
	if err != nil {
		return err
	}
	want, ended := r.desired(now)
	if want == plexus.FolderActive {
		return fmt.Errorf("revoke %s: a grant still stands", s.p.ID)
	}
	if c == nil {
		if err := r.drop(stale); err != nil {
			return err
		}
		return r.record(ctx, plexus.DecisionFile{PendingID: s.p.ID, Folder: "", Sum: s.rec.Sum})
	}
	b, err := r.redecided(now, c, ended)
	if err != nil {
		return err
	}
	return r.put(ctx, s.p.ID, want, b, append(stale, c))
}

// desired says which folder a decided decision's file belongs in, and for
// an approval that no longer grants anything, why.
func (r *Reconciler) desired(s state) (folder, ended string) {
	switch s.p.State {
	case plexus.StateApproved:
	case plexus.StateDenied:
		return plexus.FolderRejected, ""
	default:
		return plexus.FolderArchive, ""
	}
	if m := s.p.Extension; m != nil {
		if r.cfg.Installed(m.Source) {
			return plexus.FolderActive, ""
		}
		return plexus.FolderArchive, "the extension " + m.Source + " was removed"
	}
	if s.p.SignIn != nil {
		// An approved sign-in's file stands in active/, showing the page to
		// finish it at, until the owner puts it away.
		if s.rec != nil && (s.rec.Folder == plexus.FolderArchive || s.rec.Folder == plexus.FolderRejected) {
			return s.rec.Folder, ""
		}
		return plexus.FolderActive, ""
	}
	if s.p.Definition != nil {
		if s.pinned {
			return plexus.FolderActive, ""
		}
		return plexus.FolderArchive, "the definition is no longer the one served (a later decision, or the server was removed)"
	}
	now := r.now()
	var why []string
	for _, it := range s.p.Items {
		g := s.grants[it.CapabilityID]
		var w string
		switch {
		case g == nil || g.PendingID != s.p.ID:
			w = "replaced by a later decision"
		case g.RevokedAt != nil:
			w = "revoked"
		case g.UsedAt != nil:
			w = "used"
		case !g.Live(now):
			w = "its window ended"
		default:
			return plexus.FolderActive, ""
		}
		why = append(why, it.CapabilityID+" "+w)
	}
	return plexus.FolderArchive, strings.Join(why, ", ")
}

// describeState says what became of p, for notes.
func describeState(p plexus.Pending, ended string) string {
	s := p.State
	if p.Via != "" {
		s += " via " + p.Via
	}
	if p.DecidedAt != nil {
		s += " at " + p.DecidedAt.UTC().Format(humanTime)
	}
	if ended != "" {
		s += " (" + ended + ")"
	}
	return s
}

// unknown handles files named after a decision the gateway never put up:
// each is moved to rejected/ (kept as written, with the reason) so that
// nothing is ever approved from it.
func (r *Reconciler) unknown(ctx context.Context, id string, here []*copyOf) error {
	for _, c := range here {
		note := "Plexus never put up a decision " + id + ", so this file decides nothing"
		b := Annotate(c.b, note)
		if c.folder == plexus.FolderRejected {
			if bytes.Equal(b, c.b) {
				continue
			}
			if err := WriteAtomic(r.dir(c.folder), filepath.Base(c.path), b); err != nil {
				return err
			}
			continue
		}
		name, err := r.freeName(plexus.FolderRejected, id)
		if err != nil {
			return err
		}
		if err := WriteAtomic(r.dir(plexus.FolderRejected), name, b); err != nil {
			return err
		}
		if err := r.journal(ctx, &plexus.Activity{ActionType: "inbox.unknown", Target: id,
			Payload: map[string]any{"folder": c.folder, "movedTo": plexus.FolderRejected + "/" + name}}); err != nil {
			return err
		}
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// render is p's file, with a note, why it ended, and the owner's notes of
// the file it replaces.
func (r *Reconciler) render(p plexus.Pending, note, ended string, notes Notes) ([]byte, error) {
	return Render(p, RenderOptions{SameUser: p.SameUser, Note: note, Ended: ended, Notes: notes})
}

// notify tells the owner a decision was put up, in the gateway's words.
func (r *Reconciler) notify(p plexus.Pending) {
	if r.cfg.Notify == nil {
		return
	}
	var lines []string
	for _, n := range p.Narration {
		l := n.NotificationLine
		if l == "" {
			l = n.Summary
		}
		if l = oneLine(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = []string{oneLine(title(p))}
	}
	r.cfg.Notify(Notification{Line: capRunes(strings.Join(lines, " · ")+" ("+p.ID+")", 500), ID: p.ID,
		File: filepath.Join(r.cfg.Home, plexus.FolderInbox, FileName(p.ID))})
}
