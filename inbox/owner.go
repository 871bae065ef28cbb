package inbox

// The owner's decision from the command line (`plexus approve`, `plexus
// reject`), made the way a person makes it with files as API
// (docs/files-as-api.md): who decided and `via: cli` are written into the
// decision file, which then moves from inbox/ into active/ or rejected/.
// The daemon's reconciler turns the move into the gateway's one decision;
// this flow only watches for the outcome.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// How often, and for how long, [OwnerMove.Run] looks for the daemon's answer
// to its move (and, before it, for a just-made request's file).
const (
	DecisionPoll = 50 * time.Millisecond
	DecisionWait = 10 * time.Second
)

// Errors a [Daemon] wraps.
var (
	// ErrNotRunning: no daemon answers.
	ErrNotRunning = errors.New("plexus is not running")
	// ErrUnknown: the gateway never put the decision up.
	ErrUnknown = errors.New("no such decision")
)

// MoveError is an owner's move that did not happen, or whose outcome is
// not known yet, said for the owner to read as is.
type MoveError struct{ Msg string }

func (e *MoveError) Error() string { return e.Msg }

func refuse(format string, args ...any) error {
	return &MoveError{Msg: fmt.Sprintf(format, args...)}
}

// Daemon is what an owner's move asks the running daemon.
type Daemon interface {
	// Pending is the gateway's word on decision id: an error wrapping
	// [ErrNotRunning] when no daemon answers, [ErrUnknown] when the gateway
	// has no such decision.
	Pending(ctx context.Context, id string) (plexus.Pending, error)
	// MintedToken is the id of the token minted when p was approved, ""
	// when none was (the asking session had ended).
	MintedToken(ctx context.Context, p plexus.Pending) (string, error)
}

// OwnerMove is one `plexus approve` or `plexus reject` of decision ID under
// Home. Its errors are sentences for the owner.
type OwnerMove struct {
	Home, ID string
	Approve  bool
	Stamp    StampOptions // DecidedBy says who decides
	Out      io.Writer    // what the daemon made of the move
	daemon   Daemon
}

// Run stamps the decision's file and moves it, then reports what the daemon
// made of it, or that the decision waits for the daemon's next start.
// connect is called once the decision's id is known to be well-formed.
func (m *OwnerMove) Run(ctx context.Context, connect func() (Daemon, error)) error {
	if !ValidID(m.ID) {
		return refuse("no pending decision %s: a decision id is %s and 26 letters and digits", m.ID, IDPrefix)
	}
	var err error
	if m.daemon, err = connect(); err != nil {
		return err
	}
	b, running, err := m.pending(ctx)
	if err != nil {
		return err
	}
	stamped, err := Stamp(b, m.Stamp)
	var we *WindowError
	var pe *ParseError
	switch {
	case errors.As(err, &we):
		if m.Stamp.via() == plexus.ViaConsole {
			return refuse("the window you picked: %v; nothing was moved", we)
		}
		return refuse("--window: %v; nothing was moved", we)
	case errors.As(err, &pe):
		return refuse("%s cannot be read, so nothing was moved: %v\nFix it, then run this again.", m.rel(plexus.FolderInbox), pe)
	case err != nil:
		return err
	}
	f, err := Parse(stamped)
	if err != nil {
		return err // Stamp checked that it parses
	}
	if err := m.move(stamped); err != nil {
		return err
	}
	if !running {
		m.queued()
		return nil
	}
	return m.wait(ctx, f.DecidedBy)
}

// folder is where the move puts the file.
func (m *OwnerMove) folder() string {
	if m.Approve {
		return plexus.FolderActive
	}
	return plexus.FolderRejected
}

// rel is the decision's file in folder, as the owner finds it under the home.
func (m *OwnerMove) rel(folder string) string { return folder + "/" + FileName(m.ID) }

// locate finds the decision's file ([Locate]). A symlink, FIFO, socket or
// folder under the decision's name is reported, as the daemon ignores it
// too.
func (m *OwnerMove) locate() (string, []byte, error) {
	f, b, err := Locate(m.Home, m.ID)
	var nr *platform.NotRegularError
	if errors.As(err, &nr) {
		return "", nil, refuse("%s is a %s, not a decision file: Plexus never opens or follows it, and nothing was moved.\n"+
			"Remove it; the decision itself is in the journal (plexus show %s).", m.rel(f), nr.Kind, m.ID)
	}
	return f, b, err
}

// pending returns the decision's file in inbox/, and whether the daemon
// answers, or why there is nothing to decide. When the daemon runs, its
// word on the decision counts before the file's: a decision the gateway
// never put up, or one decided already, is not moved. A request is put up
// before its file is written, so a pending decision without a file is
// waited for.
func (m *OwnerMove) pending(ctx context.Context) ([]byte, bool, error) {
	deadline := time.Now().Add(DecisionWait)
	for {
		folder, b, err := m.locate()
		if err != nil {
			return nil, false, err
		}
		running, err := m.putUp(ctx, folder)
		if err != nil {
			return nil, false, err
		}
		switch {
		case folder == plexus.FolderInbox:
			return b, running, nil
		case folder != "":
			return nil, false, m.moved(folder, b)
		case !running:
			return nil, false, refuse("no pending decision %s: there is no %s (and Plexus is not running to ask)", m.ID, m.rel(plexus.FolderInbox))
		case time.Now().After(deadline):
			return nil, false, refuse("%s is pending but Plexus has not written %s yet; try again", m.ID, m.rel(plexus.FolderInbox))
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(DecisionPoll):
		}
	}
}

// putUp reports whether the daemon runs, or why the decision, whose file is
// in folder, is not one to decide.
func (m *OwnerMove) putUp(ctx context.Context, folder string) (bool, error) {
	p, err := m.daemon.Pending(ctx, m.ID)
	switch {
	case errors.Is(err, ErrNotRunning):
		return false, nil
	case errors.Is(err, ErrUnknown) && folder != "":
		return true, refuse("no pending decision %s: Plexus never put it up, and %s decides nothing", m.ID, m.rel(folder))
	case errors.Is(err, ErrUnknown):
		return true, refuse("no pending decision %s", m.ID)
	case err != nil:
		return true, err
	case p.State != plexus.StatePending:
		return true, refuse("%s was already %s", m.ID, DescribeDecision(p))
	}
	return true, nil
}

// moved explains a decision whose file has left inbox/ already, from what
// the file says.
func (m *OwnerMove) moved(folder string, b []byte) error {
	f, err := Parse(b)
	switch {
	case err != nil:
		return refuse("%s is not pending: its file is in %s/, and cannot be read: %v", m.ID, folder, err)
	case f.State == plexus.StatePending:
		return refuse("%s was already moved to %s/, and Plexus has not applied it yet (it does when it runs: plexus serve)", m.ID, folder)
	}
	ended := ""
	if f.Ended != "" {
		ended = " (" + f.Ended + ")"
	}
	return refuse("%s was already %s%s; its file is %s", m.ID, DescribeDecision(f.Pending()), ended, m.rel(folder))
}

// move stamps and moves the decision's file ([Move]).
func (m *OwnerMove) move(stamped []byte) error {
	err := Move(m.Home, m.ID, m.folder(), stamped)
	var ee *ExistsError
	if errors.As(err, &ee) {
		return refuse("%s already exists beside %s: keep one of the two, then run this again", m.rel(m.folder()), m.rel(plexus.FolderInbox))
	}
	return err
}

func (m *OwnerMove) queued() {
	fmt.Fprintf(m.Out, "Plexus is not running: the decision is queued in %s and applied at the next `plexus serve`.\n", m.rel(m.folder()))
}

// wait watches for the daemon's answer to the move: the decision decided,
// or its file back in inbox/ with the problem written into it.
func (m *OwnerMove) wait(ctx context.Context, by string) error {
	timeout := time.NewTimer(DecisionWait)
	defer timeout.Stop()
	tick := time.NewTicker(DecisionPoll)
	defer tick.Stop()
	notYet := func(why string) error {
		return refuse("%s: the decision is in %s, and Plexus has not applied it yet; see: plexus show %s", why, m.rel(m.folder()), m.ID)
	}
	for {
		if b, err := ReadFile(filepath.Join(m.Home, plexus.FolderInbox, FileName(m.ID))); err == nil {
			return m.refused(b)
		}
		p, err := m.daemon.Pending(ctx, m.ID)
		switch {
		case ctx.Err() != nil:
			return notYet("stopped waiting")
		case errors.Is(err, ErrNotRunning):
			m.queued() // it stopped meanwhile
			return nil
		case err != nil:
			return err
		case p.State != plexus.StatePending:
			return m.outcome(ctx, p, by)
		}
		select {
		case <-ctx.Done():
			return notYet("stopped waiting")
		case <-timeout.C:
			return notYet(fmt.Sprintf("no answer within %s", DecisionWait))
		case <-tick.C:
		}
	}
}

// refused reports a move the daemon undid: it put the file back in inbox/
// with what was wrong in its `problem:`.
func (m *OwnerMove) refused(b []byte) error {
	problem := "the file is back without a reason given"
	if f, err := Parse(b); err != nil {
		problem = err.Error()
	} else if f.Problem != "" {
		problem = f.Problem
	}
	return refuse("Plexus refused the decision, so nothing changed; its file is back in %s:\n  %s",
		m.rel(plexus.FolderInbox), strings.ReplaceAll(problem, "\n", "\n  "))
}

// outcome reports the decided p: what was granted or denied, by whom, and
// whether the agent has its token.
func (m *OwnerMove) outcome(ctx context.Context, p plexus.Pending, by string) error {
	want := plexus.StateDenied
	if m.Approve {
		want = plexus.StateApproved
	}
	if p.State != want || p.Via != m.Stamp.via() || p.DecidedBy != by {
		return refuse("%s was %s before this decision reached Plexus; this one changed nothing", m.ID, DescribeDecision(p))
	}
	if p.SignIn != nil && m.Approve {
		p = m.signInStarted(ctx, p)
	}
	WriteDecided(m.Out, p, by, m.rel(m.folder()))
	if !m.Approve || p.Extension != nil || p.SignIn != nil {
		return nil
	}
	jti, err := m.daemon.MintedToken(ctx, p)
	switch {
	case err != nil:
		fmt.Fprintf(m.Out, "Could not read the journal for the token: %v\n", err)
	case jti != "":
		fmt.Fprintf(m.Out, "Token %s minted and sent to the agent's session with grant_resolved.\n", jti)
	default:
		fmt.Fprintln(m.Out, "No token was minted: the session that asked has ended. The agent gets one when it asks again.")
	}
	return nil
}

// signInStarted waits, as long as a decision is waited for, until approved
// sign-in p has started (the daemon keeps the page to open, or why it could
// not start), and answers it as it stands then.
func (m *OwnerMove) signInStarted(ctx context.Context, p plexus.Pending) plexus.Pending {
	deadline := time.Now().Add(DecisionWait)
	for p.SignIn.AuthURL == "" && p.SignIn.StartError == "" && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return p
		case <-time.After(DecisionPoll):
		}
		cur, err := m.daemon.Pending(ctx, m.ID)
		if err != nil || cur.SignIn == nil {
			return p
		}
		p = cur
	}
	return p
}
