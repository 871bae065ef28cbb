package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

func journalCommand() *cli.Command {
	return &cli.Command{
		Name:  "journal",
		Usage: "read the activity journal (journal.db), newest last",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trace", Usage: "only rows of this trace id: one request's whole story"},
			&cli.StringFlag{Name: "type", Usage: "action type, exact or a prefix ending in '.' (grant.)"},
			&cli.StringFlag{Name: "agent", Usage: "only rows about this agent"},
			&cli.StringFlag{Name: "since", Usage: "only rows at or after: a duration ago (1h) or RFC 3339 time"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many rows (the newest); 0 for all"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new rows until interrupted"},
		},
		Commands: []*cli.Command{journalVerifyCommand(), journalPruneCommand()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			f := journal.Filter{TraceID: cmd.String("trace"), Type: cmd.String("type"), AgentID: cmd.String("agent")}
			if s := cmd.String("since"); s != "" {
				t, err := journal.ParseSince(s, time.Now())
				if err != nil {
					return usageError(cmd, "--since: %v", err)
				}
				f.Since = t
			}
			db, err := openJournalReadOnly(ctx, cmd.String("home"))
			if err != nil {
				return err
			}
			defer db.Close()
			if f.TraceID, err = resolveTrace(ctx, cmd, db, f.TraceID); err != nil {
				return err
			}
			rows, err := db.Newest(ctx, f, int(cmd.Int("limit")))
			if err != nil {
				return err
			}
			w, asJSON := cmd.Root().Writer, cmd.Bool("json")
			if err := client.WriteActivity(w, rows, asJSON); err != nil || !cmd.Bool("follow") {
				return err
			}
			var last int64
			if len(rows) > 0 {
				last = rows[len(rows)-1].ID
			} else if last, err = db.LastID(ctx); err != nil {
				return err
			}
			return db.Follow(ctx, f, last, 250*time.Millisecond, func(more []plexus.Activity) error {
				return client.WriteMoreActivity(w, more, asJSON)
			})
		},
	}
}

// resolveTrace turns --trace, a whole trace id or its first characters,
// into the one trace id it names. Nothing matching is an error, as is a
// prefix that fits several traces (a usage error: give more characters).
func resolveTrace(ctx context.Context, cmd *cli.Command, db *journal.DB, prefix string) (string, error) {
	if prefix == "" {
		return "", nil
	}
	const shown = 5
	ids, err := db.TraceIDs(ctx, prefix, shown+1)
	if err != nil {
		return "", err
	}
	switch {
	case len(ids) == 0:
		return "", &codedError{code: exitError, msg: fmt.Sprintf("no journal row has a trace id starting with %q", prefix)}
	case len(ids) == 1 || ids[0] == prefix:
		return ids[0], nil
	}
	list := strings.Join(ids[:min(len(ids), shown)], ", ")
	if len(ids) > shown {
		list += ", …"
	}
	return "", usageError(cmd, "--trace %q is ambiguous: it starts %s; give more characters", prefix, list)
}

func journalVerifyCommand() *cli.Command {
	return &cli.Command{
		Name: "verify",
		Usage: "check the activity journal against its keyed hash chain, its anchor and the audit mirror: " +
			"names rows edited, deleted, rewritten or cut from the end",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			home := cmd.String("home")
			db, err := openJournalReadOnly(ctx, home)
			if err != nil {
				return err
			}
			defer db.Close()
			rep, err := db.Verify(ctx, verifyOptions(home))
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				if err := json.NewEncoder(w).Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprint(w, rep.String())
			}
			if !rep.OK {
				return &codedError{code: exitError}
			}
			return nil
		},
	}
}

// verifyOptions points verify at home's chain-key, anchor and audit
// mirror. A chain-key that cannot be read is not an error here: verify
// still checks what it can and reports the key as a problem, in its words.
func verifyOptions(home string) journal.VerifyOptions {
	l := scaffold.Layout(home)
	key, err := scaffold.ReadChainKey(home)
	var le *scaffold.LayoutError
	if errors.As(err, &le) {
		texts := make([]string, len(le.Problems))
		for i, p := range le.Problems {
			texts[i] = p.String()
		}
		err = errors.New(strings.Join(texts, "; "))
	}
	return journal.VerifyOptions{Key: key, KeyErr: err, AnchorPath: l.Anchor, AuditDir: l.Audit}
}

// openJournalReadOnly opens journal.db for reading without creating it: a
// missing journal means the gateway never ran with this home.
func openJournalReadOnly(ctx context.Context, home string) (*journal.DB, error) {
	path := filepath.Join(home, "journal.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no journal at %s: start the gateway once with: plexus serve --home %s", path, home)
	}
	return journal.OpenReader(ctx, path)
}
