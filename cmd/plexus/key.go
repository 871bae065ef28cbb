package main

import (
	"context"
	"fmt"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

// keyCommand groups the connection-key commands; each subcommand is a
// constructor of its own.
func keyCommand() *cli.Command {
	return &cli.Command{
		Name:     "key",
		Usage:    "manage the owner's connection-key",
		Commands: []*cli.Command{keyShowCommand(), keyRotateCommand()},
	}
}

func keyRotateCommand() *cli.Command {
	return &cli.Command{
		Name:  "rotate",
		Usage: "replace the connection-key, ending every session opened under the old one",
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			resp, err := adm.RotateKey(ctx)
			if err != nil {
				return err
			}
			// The daemon keeps its key file; keep it in step in case this
			// daemon did not, so the next command still authenticates.
			home := cmd.String("home")
			if old, err := readConnectionKey(home); err == nil && old != resp.ConnectionKey && resp.ConnectionKey != "" {
				if err := scaffold.WriteConnectionKey(home, resp.ConnectionKey); err != nil {
					fmt.Fprintf(cmd.Root().ErrWriter, "plexus: could not update %s/%s: %v\n", home, connectionKeyFile, err)
				}
			}
			w := cmd.Root().Writer
			fmt.Fprintf(w, "New connection-key (the old one no longer works):\n\n  %s\n\n", resp.ConnectionKey)
			fmt.Fprintf(w, "Ended %d admin sessions and revoked %d of their tokens. Agents' PAT sessions are unaffected.\n",
				len(resp.RevokedSessions), len(resp.RevokedJTIs))
			return nil
		}),
	}
}

func keyShowCommand() *cli.Command {
	return &cli.Command{
		Name:  "show",
		Usage: "print the connection-key (the owner's admin credential; never give it to an agent)",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			key, err := readConnectionKey(cmd.String("home"))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.Root().Writer, key)
			return nil
		},
	}
}
