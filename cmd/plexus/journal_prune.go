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
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// journalPruneCommand is `plexus journal prune --before DATE`: the owner
// deletes the activity rows written before DATE. The journal records the
// prune as a keyed row, so `plexus journal verify` still passes after it
// (and still catches rows deleted any other way). It works whether the
// daemon runs or not: SQLite's locks order its one transaction with the
// daemon's.
func journalPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "delete the activity rows written before a date; the chain keeps verifying from a recorded checkpoint",
		Description: "Activity rows are kept forever unless you prune them here, or set activityRetentionDays in auth-config.json\n" +
			"for the daemon to prune on its own. The audit mirror (audit/*.jsonl) keeps its own 90 days.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "before", Required: true, Usage: "a date (2026-01-31, midnight UTC) or an RFC 3339 time; rows before it go"},
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
	home, err := scaffold.Load(cmd.String("home"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(home.Journal); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no journal at %s: start the gateway once with: plexus serve --home %s", home.Journal, filepath.Dir(home.Journal))
	}
	db, err := journal.Open(ctx, home.Journal, journal.Options{AuditDir: home.Audit, ChainKey: home.ChainKey, AnchorPath: home.Anchor})
	if err != nil {
		return err
	}
	res, err := db.PruneActivity(ctx, before, time.Now(), plexus.ActorHuman)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, journal.ErrPruneTooRecent) {
		return usageError(cmd, "--before %s is less than a day ago: the gateway still looks up a day of calls (idempotency keys, once grants); choose an earlier date", before.Format(time.RFC3339))
	}
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return json.NewEncoder(w).Encode(res)
	}
	if res.Rows == 0 {
		fmt.Fprintf(w, "nothing to prune: no activity row was written before %s (or they were pruned already)\n", before.Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(w, "pruned %d activity rows (up to row %d) written before %s; the prune is row %d of the journal.\n"+
		"plexus journal verify checks the chain from there.\n", res.Rows, res.Through, before.Format(time.RFC3339), res.Checkpoint)
	return nil
}

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
