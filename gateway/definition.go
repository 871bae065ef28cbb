package gateway

// The rug-pull defence of ingested sources. The owner accepts a server's
// definitions when they add it; a definition that later changes is held out
// of the manifest and put up as a decision of kind definition, and only an
// approval serves it again.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// DefinitionTTL is how long a changed definition waits for the owner. It
// outlives a grant request by far: nobody is blocked on it, and when it
// expires unanswered the definition is still held and put up again.
const DefinitionTTL = 30 * 24 * time.Hour

// Definition is one definition an ingested source serves now (an MCP tool):
// the entry it projects to, its hash (the caller's canonical form) and the
// server's JSON.
type Definition struct {
	EntryID   string
	Primitive string
	Name      string
	Hash      string
	Raw       json.RawMessage
}

// CheckPins compares source's definitions with what the owner accepted and
// answers the entry ids to hold out of the manifest. The first time a source
// is checked (it was just added) every definition is pinned as it is; a
// definition seen later for the first time is pinned too (it is new, not
// changed: it still needs a grant like any entry). A definition whose hash
// differs from its pin is held, and put up for the owner as a decision —
// one per entry and changed hash, however often the source is scanned.
func (g *Gateway) CheckPins(ctx context.Context, source string, defs []Definition) (map[string]bool, error) {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	// Most scans find every definition as pinned: answer those from a
	// read, without a durable write transaction.
	var settled bool
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		pins, err := tx.Pins(source)
		if err != nil {
			return err
		}
		settled = allPinned(pins, defs)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("check pins of %s: %w", source, err)
	}
	if settled {
		return map[string]bool{}, nil
	}
	var cmp pinComparison
	var created []string
	now := g.now()
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		pins, err := tx.Pins(source)
		if err != nil {
			return err
		}
		cmp = comparePins(pins, defs)
		created, err = commitPins(tx, source, cmp, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("check pins of %s: %w", source, err)
	}
	g.touch(created...)
	return cmp.held, nil
}

// pinComparison is how a source's definitions stand against its pins.
type pinComparison struct {
	first   bool            // the source had no pins: it was just added
	fresh   []Definition    // definitions with no pin yet, to pin as they are
	changed []pinChange     // definitions whose hash differs from the pin
	held    map[string]bool // entry ids of changed, held out of the manifest
}

// pinChange is one definition that differs from what the owner accepted.
type pinChange struct {
	def Definition
	pin plexus.Pin
}

// comparePins sorts defs, in order, into fresh, changed and settled
// (pinned as they are, left out).
func comparePins(pins []plexus.Pin, defs []Definition) pinComparison {
	out := pinComparison{first: len(pins) == 0, held: map[string]bool{}}
	byEntry := make(map[string]plexus.Pin, len(pins))
	for _, p := range pins {
		byEntry[p.EntryID] = p
	}
	for _, d := range defs {
		pin, ok := byEntry[d.EntryID]
		switch {
		case !ok:
			out.fresh = append(out.fresh, d)
		case pin.Hash != d.Hash:
			out.held[d.EntryID] = true
			out.changed = append(out.changed, pinChange{def: d, pin: pin})
		}
	}
	return out
}

// commitPins pins the fresh definitions of cmp with one row, and puts up
// each changed one for the owner with its definition.changed row unless
// the owner was already asked about that hash, inside tx. It answers the
// ids of the decisions it created.
func commitPins(tx plexus.StateTx, source string, cmp pinComparison, now time.Time) ([]string, error) {
	var pinned []string
	for _, d := range cmp.fresh {
		if err := tx.PutPin(&plexus.Pin{Source: source, EntryID: d.EntryID, Hash: d.Hash, Definition: d.Raw, PinnedAt: now}); err != nil {
			return nil, err
		}
		pinned = append(pinned, d.EntryID)
	}
	var created []string
	if len(cmp.changed) > 0 {
		waiting, err := waitingDefinitions(tx)
		if err != nil {
			return nil, err
		}
		for _, c := range cmp.changed {
			if waiting[c.def.EntryID+"|"+c.def.Hash] {
				continue
			}
			p := definitionPending(source, c, now)
			if err := tx.PutPending(p); err != nil {
				return nil, err
			}
			if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorSystem, ActionType: "definition.changed",
				Target: c.def.EntryID, Payload: map[string]any{"source": source, "pendingId": p.ID, "oldHash": c.pin.Hash, "newHash": c.def.Hash}}); err != nil {
				return nil, err
			}
			waiting[c.def.EntryID+"|"+c.def.Hash] = true
			created = append(created, p.ID)
		}
	}
	if len(pinned) == 0 {
		return created, nil
	}
	action := "definition.pinned"
	if cmp.first {
		action = "source.pinned"
	}
	return created, tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: action, Target: source,
		Payload: map[string]any{"entries": pinned}})
}

// definitionPending is the decision that puts a changed definition up for
// the owner.
func definitionPending(source string, c pinChange, now time.Time) *plexus.Pending {
	d := c.def
	return &plexus.Pending{ID: auth.NewID("pend_"), Kind: plexus.PendingDefinition, State: plexus.StatePending,
		CreatedAt: now, ExpiresAt: now.Add(DefinitionTTL), TraceID: auth.NewTraceID(),
		Definition: &plexus.DefinitionChange{Source: source, EntryID: d.EntryID, Primitive: d.Primitive, Name: d.Name,
			OldHash: c.pin.Hash, NewHash: d.Hash, Old: c.pin.Definition, New: d.Raw},
		Narration: []plexus.PendingNarration{{ID: d.EntryID, Summary: fmt.Sprintf(
			"%s changed its definition of %s after you added it; it is held out of every agent's manifest until you approve the new one.",
			source, d.EntryID),
			NotificationLine: fmt.Sprintf("%s changed the definition of %s: held until you approve it", source, d.EntryID)}},
	}
}

// allPinned reports whether every definition has a pin of its hash.
func allPinned(pins []plexus.Pin, defs []Definition) bool {
	hashes := make(map[string]string, len(pins))
	for _, p := range pins {
		hashes[p.EntryID] = p.Hash
	}
	for _, d := range defs {
		if h, ok := hashes[d.EntryID]; !ok || h != d.Hash {
			return false
		}
	}
	return true
}

// waitingDefinitions indexes, by entry and new hash, the definition
// decisions that are waiting or that the owner answered no to (denied,
// withdrawn): the owner is not asked twice about one definition. An
// expired one is asked again.
func waitingDefinitions(tx plexus.StateTx) (map[string]bool, error) {
	list, err := tx.PendingList("")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range list {
		switch p.State {
		case plexus.StatePending, plexus.StateDenied, plexus.StateWithdrawn:
			if p.Definition != nil {
				out[p.Definition.EntryID+"|"+p.Definition.NewHash] = true
			}
		}
	}
	return out, nil
}

// ForgetPins drops source's pins (its server was removed): adding it again
// accepts its definitions afresh, as any first add does. Undecided changes
// of it are withdrawn.
func (g *Gateway) ForgetPins(ctx context.Context, source string) error {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	var withdrawn []string
	now := g.now()
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		withdrawn = withdrawn[:0]
		if err := tx.DeletePins(source); err != nil {
			return err
		}
		list, err := tx.PendingList(plexus.StatePending)
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.Definition == nil || p.Definition.Source != source {
				continue
			}
			p.State, p.DecidedAt, p.DecidedBy, p.Via, p.Reason = plexus.StateWithdrawn, &now, plexus.ActorSystem, plexus.ViaSystem, "the server was removed"
			if err := tx.PutPending(&p); err != nil {
				return err
			}
			if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorSystem, ActionType: "definition.withdrawn",
				Target: p.ID, Payload: map[string]any{"source": source, "entry": p.Definition.EntryID, "reason": p.Reason}}); err != nil {
				return err
			}
			withdrawn = append(withdrawn, p.ID)
		}
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "source.unpinned", Target: source})
	})
	if err != nil {
		return fmt.Errorf("forget pins of %s: %w", source, err)
	}
	g.touch(withdrawn...)
	return nil
}

// decideDefinition applies the owner's answer to a changed definition,
// inside Decide's transaction. Approval pins exactly the definition the
// decision showed, so a server that changed it again meanwhile is held
// again (with a new decision); denial leaves the old pin, so the entry
// stays held until the server serves the accepted definition again. It
// answers the source to rescan after the commit ("" for none).
func (g *Gateway) decideDefinition(tx plexus.StateTx, p *plexus.Pending, d plexus.Decision, actor string, now time.Time) (string, error) {
	c := p.Definition
	if c == nil {
		return "", plexus.Errorf(plexus.CodeConflict, "decision %s carries no definition", p.ID)
	}
	if d.Approve && (len(d.Items) > 0 || len(d.Verbs) > 0 || len(d.Capabilities) > 0 || d.TrustWindow != nil) {
		return "", plexus.Errorf(plexus.CodeInvalidRequest, "a changed definition is approved or denied as a whole")
	}
	payload := map[string]any{"decidedBy": d.DecidedBy, "via": d.Via, "reason": p.Reason, "source": c.Source, "entry": c.EntryID}
	switch {
	case d.Approve:
		p.State = plexus.StateApproved
		payload["hash"] = c.NewHash
		if err := tx.PutPin(&plexus.Pin{Source: c.Source, EntryID: c.EntryID, Hash: c.NewHash, Definition: c.New,
			PendingID: p.ID, PinnedAt: now}); err != nil {
			return "", err
		}
	case d.Withdraw:
		p.State = plexus.StateWithdrawn
	default:
		p.State = plexus.StateDenied
	}
	if err := tx.PutPending(p); err != nil {
		return "", err
	}
	if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: actor, ActionType: "definition." + p.State,
		Target: p.ID, Payload: payload}); err != nil {
		return "", err
	}
	if p.State == plexus.StateApproved {
		return c.Source, nil
	}
	return "", nil
}

// revokeDefinition takes back an approved definition (its file left
// active/): the pin returns to the definition approved before, so the
// entry is held again while the server serves the changed one.
func (g *Gateway) revokeDefinition(tx plexus.StateTx, p *plexus.Pending, decidedBy, via, reason string) (string, error) {
	c := p.Definition
	pins, err := tx.Pins(c.Source)
	if err != nil {
		return "", err
	}
	for _, pin := range pins {
		if pin.EntryID != c.EntryID {
			continue
		}
		if pin.PendingID != p.ID {
			return "", nil // a later decision (or a re-add) pinned it since
		}
		if err := tx.PutPin(&plexus.Pin{Source: c.Source, EntryID: c.EntryID, Hash: c.OldHash, Definition: c.Old,
			PinnedAt: g.now()}); err != nil {
			return "", err
		}
		if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorHuman, ActionType: "definition.revoked",
			Target: p.ID, Payload: map[string]any{"decidedBy": decidedBy, "via": via, "reason": reason, "source": c.Source,
				"entry": c.EntryID, "hash": c.OldHash}}); err != nil {
			return "", err
		}
		return c.Source, nil
	}
	return "", nil
}

// refreshSource rescans a source whose pins changed, so the held or
// released entry leaves or enters the manifest (manifest_changed).
func (g *Gateway) refreshSource(ctx context.Context, source string) {
	if _, ok := g.d.Registry.Source(source); !ok {
		return
	}
	if err := g.d.Registry.Refresh(ctx, source); err != nil {
		g.log.Warn("rescan after a definition decision", "source", source, "err", err)
	}
}
