package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/urfave/cli/v3"
)

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one decision: what is asked, by whom, the gateway's narration and the agent's purpose",
		ArgsUsage: "<pending-id>",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(1, "<pending-id>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			p, err := adm.ShowPending(ctx, cmd.Args().First())
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, p)
			}
			fmt.Fprintf(w, "%s — %s request by %s, %s\n", p.ID, kindOr(p.Kind), p.AgentID, p.State)
			fmt.Fprintf(w, "  asked %s, expires %s, trace %s\n", timeString(p.CreatedAt), timeString(p.ExpiresAt), p.TraceID)
			if p.Bundle != nil && p.Bundle.Name != "" {
				fmt.Fprintf(w, "  task bundle: %s\n", p.Bundle.Name)
			}
			fmt.Fprintln(w)
			for _, it := range p.Items {
				fmt.Fprintf(w, "  %s  %s  window %s  %s, %s\n", it.CapabilityID, verbsString(it.Verbs), windowString(&it.TrustWindow),
					it.Provenance, it.Sensitivity)
				if it.Constraint != nil {
					b, _ := json.Marshal(it.Constraint)
					fmt.Fprintf(w, "      only for input matching %s\n", b)
				}
				for _, m := range it.Members {
					fmt.Fprintf(w, "      also runs %s (%s)\n", m.ID, verbsString(m.Verbs))
				}
			}
			if len(p.Narration) > 0 {
				fmt.Fprintln(w)
				for _, n := range p.Narration {
					fmt.Fprintf(w, "  %s\n", n.Summary)
				}
			}
			if p.Purpose != "" {
				fmt.Fprintf(w, "\n  The agent says: %q\n", p.Purpose)
			}
			if p.State == plexus.StatePending {
				fmt.Fprintf(w, "\nDecide with: plexus approve %s [--window …] | plexus reject %s --reason \"…\"\n", p.ID, p.ID)
				return nil
			}
			decided := ""
			if p.DecidedAt != nil {
				decided = " at " + timeString(*p.DecidedAt)
			}
			fmt.Fprintf(w, "\n%s by %s via %s%s", strings.ToUpper(p.State[:1])+p.State[1:], dash(p.DecidedBy), dash(p.Via), decided)
			if p.Reason != "" {
				fmt.Fprintf(w, ": %s", p.Reason)
			}
			fmt.Fprintln(w)
			return nil
		}),
	}
}

func kindOr(k string) string {
	if k == "" {
		return plexus.PendingGrant
	}
	return k
}
