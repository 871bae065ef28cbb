package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/plexus-gw/plexus/client"
	"github.com/urfave/cli/v3"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show whether the daemon runs, and what it serves",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			st, err := adm.Status(ctx)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, st)
			}
			fmt.Fprintf(w, "Plexus %s (protocol %s) running at %s\n", st.Gateway.Version, st.Gateway.Protocol, st.Gateway.BaseURL)
			t := newTable(w)
			fmt.Fprintf(t, "home:\t%s\n", dash(st.Home))
			if !st.Started.IsZero() {
				fmt.Fprintf(t, "started:\t%s (up %s)\n", timeString(st.Started), time.Since(st.Started).Round(time.Minute))
			}
			fmt.Fprintf(t, "entries:\t%d (revision %d)\n", st.Entries, st.Revision)
			fmt.Fprintf(t, "agents:\t%d\n", st.Agents)
			fmt.Fprintf(t, "grants:\t%d\n", st.Grants)
			fmt.Fprintf(t, "pending:\t%d\n", st.Pending)
			if j := st.Journal; j != nil {
				last := ""
				if j.LastFailure != nil {
					last = fmt.Sprintf(" (last: %s %s)", timeString(*j.LastFailure), j.LastWhat)
				}
				if j.WriteFailures > 0 {
					fmt.Fprintf(t, "journal write failures:\t%d%s\n", j.WriteFailures, last)
				}
				if j.MirrorFailures > 0 {
					fmt.Fprintf(t, "audit mirror write failures:\t%d (run plexus journal verify)\n", j.MirrorFailures)
				}
				if j.AnchorFailures > 0 {
					fmt.Fprintf(t, "journal anchor write failures:\t%d (run plexus journal verify)\n", j.AnchorFailures)
				}
			}
			if err := t.Flush(); err != nil {
				return err
			}
			if len(st.Sources) > 0 {
				fmt.Fprintln(w)
				t = newTable(w)
				fmt.Fprintln(t, "SOURCE\tPROVENANCE\tENTRIES\tHEALTH")
			}
			for _, s := range st.Sources {
				health := string(s.Health.Status)
				if s.Health.Detail != "" {
					health += " (" + s.Health.Detail + ")"
				}
				fmt.Fprintf(t, "%s\t%s\t%d\t%s\n", s.ID, dash(string(s.Provenance)), s.Entries, dash(health))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			if len(st.SameUserAgents) > 0 {
				fmt.Fprintf(w, "\nWARNING: these agents run as your own OS user: %s.\n", strings.Join(st.SameUserAgents, ", "))
				fmt.Fprintln(w, "They can read PLEXUS_HOME (keys, journal) and step around the gateway. Run them as another")
				fmt.Fprintln(w, "user or in a sandbox, or set \"strictSameUser\": true in auth-config.json to refuse them.")
			}
			return nil
		}),
	}
}
