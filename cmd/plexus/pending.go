package main

import (
	"context"
	"path/filepath"

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
			return inbox.WritePendingTable(w, pending, filepath.Join(cmd.Root().String("home"), "inbox"))
		}),
	}
}
