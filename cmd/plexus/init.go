package main

import (
	"context"
	"fmt"

	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create the PLEXUS_HOME layout (idempotent; never overwrites a file)",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			home := cmd.String("home")
			res, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey})
			if err != nil {
				return err
			}
			if err := scaffold.Verify(home); err != nil {
				return err
			}
			w := cmd.Root().Writer
			if len(res.Created) == 0 {
				fmt.Fprintf(w, "%s is already initialized; nothing changed.\n", home)
				return nil
			}
			fmt.Fprintf(w, "Initialized %s:\n", home)
			for _, p := range res.Created {
				fmt.Fprintf(w, "  created %s\n", p)
			}
			fmt.Fprintln(w, "Next: plexus serve")
			return nil
		},
	}
}
