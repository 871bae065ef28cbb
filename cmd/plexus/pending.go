package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/urfave/cli/v3"
)

func pendingCommand() *cli.Command {
	return &cli.Command{
		Name:  "pending",
		Usage: "list decisions waiting for the owner",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			pending, err := adm.Pending(ctx)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				if pending == nil {
					pending = []plexus.Pending{}
				}
				return printJSON(w, pending)
			}
			t := newTable(w)
			fmt.Fprintln(t, "ID\tAGENT\tASKS FOR\tWINDOW\tSENSITIVITY\tEXPIRES\tPURPOSE")
			for _, p := range pending {
				var asks, windows []string
				sens := plexus.Sensitivity("")
				ids, rs := inbox.Reaches(p)
				brief := func(id string) string {
					if i := slices.Index(ids, id); i >= 0 && rs[i] != nil {
						return ": " + inbox.ReachBrief(*rs[i])
					}
					return ""
				}
				for _, it := range p.Items {
					asks = append(asks, it.CapabilityID+" ("+verbsString(it.Verbs)+brief(it.CapabilityID)+")")
					windows = append(windows, windowString(&it.TrustWindow)) // in the order of asks
					if it.Sensitivity.Rank() > sens.Rank() {
						sens = it.Sensitivity
					}
				}
				prefix := "" // what kind of decision, before the list of what it asks for
				switch {
				case p.Definition != nil:
					asks = []string{"changed definition: " + p.Definition.EntryID}
				case p.Extension != nil:
					prefix, asks = "extension "+p.Extension.Source+": ", nil
					for i, id := range ids {
						if rs[i] == nil {
							asks = append(asks, id+" (reach not recorded)")
							continue
						}
						asks = append(asks, id+" ("+verbsString(rs[i].Verbs)+brief(id)+")")
					}
				case p.Kind != "" && p.Kind != plexus.PendingGrant:
					prefix = p.Kind + ": "
				}
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, dash(p.AgentID), dash(prefix+strings.Join(asks, ", ")), dash(strings.Join(windows, ", ")),
					dash(string(sens)), timeString(p.ExpiresAt), dash(inbox.TermSafe(oneLine(p.Purpose, 60))))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			if len(pending) > 0 {
				inbox := filepath.Join(cmd.Root().String("home"), "inbox")
				fmt.Fprintf(w, "\nEach is a file in %s: move it to ../active/ to approve (edit it first to narrow),\n"+
					"to ../rejected/ to deny, or delete it to withdraw.\n"+
					"Or: plexus show <id> | plexus approve <id> [--window …] | plexus reject <id> --reason \"…\"\n", inbox)
			}
			return nil
		}),
	}
}

func describeItems(items []plexus.PendingItem) string {
	if len(items) == 0 {
		return "-"
	}
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = fmt.Sprintf("%s (%s, window %s)", it.CapabilityID, verbsString(it.Verbs), windowString(&it.TrustWindow))
	}
	return strings.Join(s, ", ")
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
