package main

import (
	"context"
	"fmt"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/urfave/cli/v3"
)

func grantsCommand() *cli.Command {
	return &cli.Command{
		Name:  "grants",
		Usage: "list standing grants, or revoke one",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "only this agent's grants"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			all, err := adm.Grants(ctx)
			if err != nil {
				return err
			}
			grants := []plexus.StandingGrant{}
			for _, g := range all {
				if a := cmd.String("agent"); a == "" || g.AgentID == a {
					grants = append(grants, g)
				}
			}
			if cmd.Bool("json") {
				return printJSON(cmd.Root().Writer, grants)
			}
			return client.WriteGrants(cmd.Root().Writer, grants, true)
		}),
		Commands: []*cli.Command{grantsRevokeCommand()},
	}
}

func grantsRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:      "revoke",
		Usage:     "revoke an agent's grant on a capability, and every token carrying it",
		ArgsUsage: "<agent-id> <capability>",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, for the journal"}},
		Action: withAdmin(2, "<agent-id> <capability>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			agent, capID := cmd.Args().Get(0), cmd.Args().Get(1)
			resp, err := adm.RevokeGrant(ctx, agent, capID, cmd.String("reason"))
			if err != nil {
				return err
			}
			removed := "no standing grant was left"
			if resp.GrantRemoved {
				removed = "grant removed"
			}
			fmt.Fprintf(cmd.Root().Writer, "Revoked %s for %s: %s, %d tokens revoked.\n", capID, agent, removed, len(resp.RevokedJTIs))
			return nil
		}),
	}
}
