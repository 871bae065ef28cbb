package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// journalPruneCommand is `plexus journal prune --before DATE`: the owner
// deletes the activity rows written before DATE. The journal records the
// prune as keyed rows, so `plexus journal verify` still passes after it
// (and still catches rows deleted any other way). While the daemon runs
// the command asks it to prune (POST /admin/api/journal/prune), so that
// one process writes the journal; otherwise it opens the journal itself.
func journalPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "delete the activity rows written before a date; the chain keeps verifying from a recorded checkpoint",
		Description: "Activity rows are kept forever unless you prune them here, or set activityRetentionDays in auth-config.json\n" +
			"for the daemon to prune on its own. The audit mirror (audit/*.jsonl) keeps its own 90 days.\n" +
			"The rows are verified first: rows that do not verify are not pruned unless you pass --force, and then\n" +
			"the journal records their problems and plexus journal verify keeps reporting them.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "before", Required: true, Usage: "a date (2026-01-31, midnight UTC) or an RFC 3339 time; rows before it go"},
			&cli.BoolFlag{Name: "force", Usage: "prune even rows that do not verify, recording their problems in the journal"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
		},
		Action: runJournalPrune,
	}
}

func runJournalPrune(ctx context.Context, cmd *cli.Command) error {
	before, err := parsePruneDate(cmd.String("before"))
	if err != nil {
		return usageError(cmd, "--before %q: %v", cmd.String("before"), err)
	}
	req := plexus.JournalPruneRequest{Before: before, Force: cmd.Bool("force")}
	res, ran, err := pruneThroughDaemon(ctx, cmd, req)
	if err == nil && !ran {
		res, err = pruneLocally(ctx, cmd, req)
	}
	if err != nil {
		return pruneError(cmd, before, err)
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return json.NewEncoder(w).Encode(res)
	}
	if res.Rows == 0 {
		fmt.Fprintf(w, "nothing to prune: no activity row was written before %s (or they were pruned already)\n", before.Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(w, "pruned %d activity rows (up to row %d) written before %s; the prune is recorded up to row %d of the journal.\n"+
		"plexus journal verify checks the chain from there.\n", res.Rows, res.Through, before.Format(time.RFC3339), res.Checkpoint)
	if len(res.Unverified) > 0 {
		fmt.Fprintf(w, "forced: %d problem(s) in the pruned rows, recorded in the journal (plexus journal verify reports them):\n", len(res.Unverified))
		for _, p := range res.Unverified {
			fmt.Fprintf(w, "  row %d: %s — %s\n", p.ID, p.Kind, p.Detail)
		}
	}
	return nil
}

// pruneThroughDaemon asks the running daemon to prune. ran is false when
// no daemon runs for --home (no address file, or nothing listening there
// and no --addr given): then the command prunes itself.
func pruneThroughDaemon(ctx context.Context, cmd *cli.Command, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, bool, error) {
	_, written, err := daemon.ReadAddress(cmd.String("home"))
	if err != nil || !written && !cmd.IsSet("addr") {
		return plexus.JournalPruneResponse{}, false, err
	}
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return plexus.JournalPruneResponse{}, true, err
	}
	key, err := readConnectionKey(cmd.String("home"))
	if err != nil {
		return plexus.JournalPruneResponse{}, true, err
	}
	adm, err := client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
	if err != nil {
		return plexus.JournalPruneResponse{}, true, err
	}
	res, err := adm.PruneJournal(ctx, req)
	if errors.Is(err, client.ErrUnreachable) && !cmd.IsSet("addr") {
		return res, false, nil // a daemon that stopped without removing its address file
	}
	return res, true, notRunning(addr, err)
}

// pruneLocally prunes with no daemon running, opening the journal itself.
func pruneLocally(ctx context.Context, cmd *cli.Command, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, error) {
	home, err := scaffold.Load(cmd.String("home"))
	if err != nil {
		return plexus.JournalPruneResponse{}, err
	}
	if _, err := os.Stat(home.Journal); errors.Is(err, os.ErrNotExist) {
		return plexus.JournalPruneResponse{}, fmt.Errorf("no journal at %s: start the gateway once with: plexus serve --home %s", home.Journal, filepath.Dir(home.Journal))
	}
	db, err := journal.Open(ctx, home.Journal, journal.Options{AuditDir: home.Audit, ChainKey: home.ChainKey, AnchorPath: home.Anchor})
	if err != nil {
		return plexus.JournalPruneResponse{}, err
	}
	res, err := db.PruneActivity(ctx, journal.PruneRequest{Before: req.Before, Now: time.Now(), By: plexus.ActorHuman, Force: req.Force})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	out := plexus.JournalPruneResponse{Rows: res.Rows, Through: res.Through, Checkpoint: res.Checkpoint}
	for _, p := range res.Unverified {
		out.Unverified = append(out.Unverified, plexus.JournalProblem(p))
	}
	return out, err
}

// pruneError turns a refused prune, the daemon's or the journal's own,
// into the owner's next step.
func pruneError(cmd *cli.Command, before time.Time, err error) error {
	var pe *journal.PrefixError
	switch {
	case errors.Is(err, journal.ErrPruneTooRecent) || client.CodeOf(err) == plexus.CodeInvalidRequest:
		return usageError(cmd, "--before %s is less than a day ago: the gateway still looks up a day of calls (idempotency keys, once grants); choose an earlier date", before.Format(time.RFC3339))
	case errors.As(err, &pe):
		return &codedError{code: exitError, msg: pe.Error() + "\nnothing was pruned: " + forceHint}
	case client.CodeOf(err) == plexus.CodeConflict:
		var ce *client.Error
		errors.As(err, &ce)
		return &codedError{code: exitError, msg: ce.Body.Message + "\nnothing was pruned: " + forceHint}
	}
	return err
}

const forceHint = "find out what happened (plexus journal verify), or pass --force to prune them anyway (the journal records their problems, and verify keeps reporting them)"

// parsePruneDate reads a date (midnight UTC) or an RFC 3339 time.
func parsePruneDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a date like 2026-01-31 or an RFC 3339 time like 2026-01-31T12:00:00Z")
	}
	return t, nil
}
