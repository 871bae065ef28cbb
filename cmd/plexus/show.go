package main

import (
	"context"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
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
			if cmd.Bool("json") {
				return printJSON(cmd.Root().Writer, p)
			}
			inbox.WritePending(cmd.Root().Writer, p)
			return nil
		}),
	}
}
