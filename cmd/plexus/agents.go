package main

import (
	"context"
	"fmt"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/urfave/cli/v3"
)

func agentsCommand() *cli.Command {
	return &cli.Command{
		Name:  "agents",
		Usage: "connect, list and revoke agents",
		Commands: []*cli.Command{
			agentsConnectCommand(),
			agentsListCommand(),
			agentsRevokeCommand(),
			agentsViewCommand(),
		},
	}
}

func agentsConnectCommand() *cli.Command {
	return &cli.Command{
		Name:      "connect",
		Usage:     "register an agent and print its one-time enrollment code",
		ArgsUsage: "<agent-id>",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "label", Usage: "a human name for the agent"},
			&cli.StringSliceFlag{Name: "grant", Usage: "a starting standing grant, `<capability>[=verbs]` (verbs comma-separated; default read); repeatable"},
			&cli.StringFlag{Name: "window", Usage: "trust window of the starting grants: once, 1h, 1d, 7d, until-revoked or a duration"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: withAdmin(1, "<agent-id>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			req := plexus.ConnectRequest{AgentID: cmd.Args().First(), Label: cmd.String("label")}
			grants, err := connectGrants(cmd)
			if err != nil {
				return err
			}
			req.Grants = grants
			resp, err := adm.Connect(ctx, req)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, resp)
			}
			install := "plexus agent enroll " + resp.Code
			addr, err := gatewayAddr(cmd)
			if err != nil {
				return err
			}
			if addr != defaultAddr {
				install += " --addr " + addr
			}
			return client.WriteConnected(w, resp, install)
		}),
	}
}

func agentsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list connected agents",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			agents, err := adm.Agents(ctx)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				if agents == nil {
					agents = []plexus.Agent{}
				}
				return printJSON(w, agents)
			}
			return client.WriteAgents(w, agents)
		}),
	}
}

func agentsRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:      "revoke",
		Usage:     "revoke an agent: its PAT, sessions, tokens and grants",
		ArgsUsage: "<agent-id>",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, for the journal"}},
		Action: withAdmin(1, "<agent-id>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			resp, err := adm.RevokeAgent(ctx, cmd.Args().First(), cmd.String("reason"))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Revoked agent %q: %d sessions ended, %d tokens and %d grants revoked.\n",
				resp.AgentID, len(resp.RevokedSessions), len(resp.RevokedJTIs), resp.RevokedGrants)
			return nil
		}),
	}
}

// connectGrants reads the starting standing grants of --grant and --window,
// as `agents connect` and `clients connect` take them.
func connectGrants(cmd *cli.Command) ([]plexus.ConnectGrant, error) {
	var window *plexus.TrustWindow
	if s := cmd.String("window"); s != "" {
		w, err := plexus.ParseTrustWindow(s)
		if err != nil {
			return nil, usageError(cmd, "%v", err)
		}
		window = w
	}
	var out []plexus.ConnectGrant
	for _, s := range cmd.StringSlice("grant") {
		g, err := plexus.ParseConnectGrant(s)
		if err != nil {
			return nil, usageError(cmd, "--grant %q: %v", s, err)
		}
		g.TrustWindow = window
		out = append(out, g)
	}
	return out, nil
}
