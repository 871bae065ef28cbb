package main

// `plexus approve` and `plexus reject` decide the way a person does with
// files as API (docs/files-as-api.md): they write who decided and `via: cli`
// into the decision file, then move it from inbox/ into active/ or
// rejected/. The daemon's reconciler turns the move into the gateway's one
// decision; these commands only watch for the outcome.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/platform"
	"github.com/urfave/cli/v3"
)

// How often, and for how long, approve and reject look for the daemon's
// answer to their move (and, before it, for a just-made request's file).
const (
	decisionPoll = 50 * time.Millisecond
	decisionWait = 10 * time.Second
)

func approveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "approve a pending decision by moving its file to active/, optionally with a shorter trust window",
		ArgsUsage: "<pending-id>",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "window", Usage: "a shorter trust window for each capability that asked longer: once, 1h, 1d, 7d or a duration such as 36h or 3d (execute stays once)"},
			&cli.StringFlag{Name: "reason", Usage: "why, for the journal"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<pending-id>"); err != nil {
				return err
			}
			opts := inbox.StampOptions{Reason: cmd.String("reason")}
			if s := cmd.String("window"); s != "" {
				w, err := inbox.ParseWindow(s)
				if err != nil {
					return usageError(cmd, "--window: %v", err)
				}
				opts.Window = &w
			}
			return decide(ctx, cmd, true, opts)
		},
	}
}

func rejectCommand() *cli.Command {
	return &cli.Command{
		Name:      "reject",
		Usage:     "deny a pending decision by moving its file to rejected/",
		ArgsUsage: "<pending-id>",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, shown to the agent and kept in the journal", Required: true}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<pending-id>"); err != nil {
				return err
			}
			if strings.TrimSpace(cmd.String("reason")) == "" {
				return usageError(cmd, "--reason: say why; the agent is told")
			}
			return decide(ctx, cmd, false, inbox.StampOptions{Reason: cmd.String("reason")})
		},
	}
}

// mover is one run of approve or reject.
type mover struct {
	id, home string
	approve  bool
	adm      *client.Admin
	w        io.Writer
}

// decide stamps decision id's file and moves it, then reports what the
// daemon made of it, or that the decision waits for the daemon's next start.
func decide(ctx context.Context, cmd *cli.Command, approve bool, opts inbox.StampOptions) error {
	m := &mover{id: cmd.Args().First(), home: cmd.String("home"), approve: approve, w: cmd.Root().Writer}
	if !inbox.ValidID(m.id) {
		return failure("no pending decision %s: a decision id is %s and 26 letters and digits", m.id, inbox.IDPrefix)
	}
	key, err := readConnectionKey(m.home)
	if err != nil {
		return err
	}
	if m.adm, err = client.NewAdmin(baseURL(cmd.String("addr")), key, client.WithVia(plexus.ViaCLI)); err != nil {
		return err
	}
	b, running, err := m.pending(ctx)
	if err != nil {
		return err
	}
	opts.DecidedBy = processOf(cmd).decider()
	stamped, err := inbox.Stamp(b, opts)
	var we *inbox.WindowError
	var pe *inbox.ParseError
	switch {
	case errors.As(err, &we):
		return failure("--window: %v; nothing was moved", we)
	case errors.As(err, &pe):
		return failure("%s cannot be read, so nothing was moved: %v\nFix it, then run this again.", m.rel(plexus.FolderInbox), pe)
	case err != nil:
		return err
	}
	f, err := inbox.Parse(stamped)
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

// failure is an error the owner reads as is, exit status 1.
func failure(format string, args ...any) error {
	return &codedError{code: exitError, msg: fmt.Sprintf(format, args...)}
}

// folder is where the move puts the file.
func (m *mover) folder() string {
	if m.approve {
		return plexus.FolderActive
	}
	return plexus.FolderRejected
}

// rel is the decision's file in folder, as the owner finds it under the home.
func (m *mover) rel(folder string) string { return folder + "/" + inbox.FileName(m.id) }

func (m *mover) path(folder string) string {
	return filepath.Join(m.home, folder, inbox.FileName(m.id))
}

// locate finds the decision's file ([inbox.Locate]). A symlink, FIFO,
// socket or folder under the decision's name is reported, as the daemon
// ignores it too.
func (m *mover) locate() (string, []byte, error) {
	f, b, err := inbox.Locate(m.home, m.id)
	var nr *platform.NotRegularError
	if errors.As(err, &nr) {
		return "", nil, failure("%s is a %s, not a decision file: Plexus never opens or follows it, and nothing was moved.\n"+
			"Remove it; the decision itself is in the journal (plexus show %s).", m.rel(f), nr.Kind, m.id)
	}
	return f, b, err
}

// pending returns the decision's file in inbox/, and whether the daemon
// answers, or why there is nothing to decide. When the daemon runs, its
// word on the decision counts before the file's: a decision the gateway
// never put up, or one decided already, is not moved. A request is put up
// before its file is written, so a pending decision without a file is
// waited for.
func (m *mover) pending(ctx context.Context) ([]byte, bool, error) {
	deadline := time.Now().Add(decisionWait)
	for {
		folder, b, err := m.locate()
		if err != nil {
			return nil, false, err
		}
		p, err := m.adm.ShowPending(ctx, m.id)
		running := !errors.Is(err, client.ErrUnreachable)
		var ce *client.Error
		switch {
		case !running:
		case errors.As(err, &ce) && ce.Body.Code == plexus.CodeNotFound:
			if folder != "" {
				return nil, false, failure("no pending decision %s: Plexus never put it up, and %s decides nothing", m.id, m.rel(folder))
			}
			return nil, false, failure("no pending decision %s", m.id)
		case err != nil:
			return nil, false, err
		case p.State != plexus.StatePending:
			return nil, false, failure("%s was already %s", m.id, inbox.DescribeDecision(p))
		}
		switch {
		case folder == plexus.FolderInbox:
			return b, running, nil
		case folder != "":
			return nil, false, m.moved(folder, b)
		case !running:
			return nil, false, failure("no pending decision %s: there is no %s (and Plexus is not running to ask)", m.id, m.rel(plexus.FolderInbox))
		case time.Now().After(deadline):
			return nil, false, failure("%s is pending but Plexus has not written %s yet; try again", m.id, m.rel(plexus.FolderInbox))
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(decisionPoll):
		}
	}
}

// moved explains a decision whose file has left inbox/ already, from what
// the file says.
func (m *mover) moved(folder string, b []byte) error {
	f, err := inbox.Parse(b)
	switch {
	case err != nil:
		return failure("%s is not pending: its file is in %s/, and cannot be read: %v", m.id, folder, err)
	case f.State == plexus.StatePending:
		return failure("%s was already moved to %s/, and Plexus has not applied it yet (it does when it runs: plexus serve)", m.id, folder)
	}
	ended := ""
	if f.Ended != "" {
		ended = " (" + f.Ended + ")"
	}
	return failure("%s was already %s%s; its file is %s", m.id, inbox.DescribeDecision(f.Pending()), ended, m.rel(folder))
}

// move stamps and moves the decision's file ([inbox.Move]).
func (m *mover) move(stamped []byte) error {
	err := inbox.Move(m.home, m.id, m.folder(), stamped)
	var ee *inbox.ExistsError
	if errors.As(err, &ee) {
		return failure("%s already exists beside %s: keep one of the two, then run this again", m.rel(m.folder()), m.rel(plexus.FolderInbox))
	}
	return err
}

func (m *mover) queued() {
	fmt.Fprintf(m.w, "Plexus is not running: the decision is queued in %s and applied at the next `plexus serve`.\n", m.rel(m.folder()))
}

// wait watches for the daemon's answer to the move: the decision decided,
// or its file back in inbox/ with the problem written into it.
func (m *mover) wait(ctx context.Context, by string) error {
	timeout := time.NewTimer(decisionWait)
	defer timeout.Stop()
	tick := time.NewTicker(decisionPoll)
	defer tick.Stop()
	notYet := func(why string) error {
		return failure("%s: the decision is in %s, and Plexus has not applied it yet; see: plexus show %s", why, m.rel(m.folder()), m.id)
	}
	for {
		if b, err := inbox.ReadFile(m.path(plexus.FolderInbox)); err == nil {
			return m.refused(b)
		}
		p, err := m.adm.ShowPending(ctx, m.id)
		switch {
		case ctx.Err() != nil:
			return notYet("stopped waiting")
		case errors.Is(err, client.ErrUnreachable):
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
			return notYet(fmt.Sprintf("no answer within %s", decisionWait))
		case <-tick.C:
		}
	}
}

// refused reports a move the daemon undid: it put the file back in inbox/
// with what was wrong in its `problem:`.
func (m *mover) refused(b []byte) error {
	problem := "the file is back without a reason given"
	if f, err := inbox.Parse(b); err != nil {
		problem = err.Error()
	} else if f.Problem != "" {
		problem = f.Problem
	}
	return failure("Plexus refused the decision, so nothing changed; its file is back in %s:\n  %s",
		m.rel(plexus.FolderInbox), strings.ReplaceAll(problem, "\n", "\n  "))
}

// outcome reports the decided p: what was granted or denied, by whom, and
// whether the agent has its token.
func (m *mover) outcome(ctx context.Context, p plexus.Pending, by string) error {
	want := plexus.StateDenied
	if m.approve {
		want = plexus.StateApproved
	}
	if p.State != want || p.Via != plexus.ViaCLI || p.DecidedBy != by {
		return failure("%s was %s before this decision reached Plexus; this one changed nothing", m.id, inbox.DescribeDecision(p))
	}
	inbox.WriteDecided(m.w, p, by, m.rel(m.folder()))
	if !m.approve || p.Extension != nil {
		return nil
	}
	jti, err := m.mintedToken(ctx, p)
	switch {
	case err != nil:
		fmt.Fprintf(m.w, "Could not read the journal for the token: %v\n", err)
	case jti != "":
		fmt.Fprintf(m.w, "Token %s minted and sent to the agent's session with grant_resolved.\n", jti)
	default:
		fmt.Fprintln(m.w, "No token was minted: the session that asked has ended. The agent gets one when it asks again.")
	}
	return nil
}

// mintedToken returns the id of the token minted when p was approved, ""
// when none was (the asking session had ended), read from the journal as a
// script reads it.
func (m *mover) mintedToken(ctx context.Context, p plexus.Pending) (string, error) {
	db, err := openJournalReadOnly(ctx, m.home)
	if err != nil {
		return "", err
	}
	defer db.Close()
	return db.MintedOnApproval(ctx, p.TraceID, p.ID)
}
