package main

import (
	"context"

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
			return client.WriteStatus(w, st)
		}),
	}
}
