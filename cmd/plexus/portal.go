package main

import (
	"context"
	"fmt"
	"regexp"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/sources/portal"
	"github.com/urfave/cli/v3"
)

// aliasRe is what a portal alias may be: it becomes part of capability ids.
var aliasRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func portalCommand() *cli.Command {
	return &cli.Command{
		Name:     "portal",
		Usage:    "expose folders to agents, path-confined",
		Commands: []*cli.Command{portalAddCommand(), portalListCommand(), portalRemoveCommand()},
	}
}

func portalAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "expose a folder under an alias",
		ArgsUsage: "<path> <alias>",
		Action: withAdmin(2, "<path> <alias>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			path, alias := cmd.Args().Get(0), cmd.Args().Get(1)
			if !aliasRe.MatchString(alias) {
				return usageError(cmd, "alias %q: use letters, digits, '-' and '_'", alias)
			}
			sc, pc, err := portal.OwnerSource(path, alias)
			if err != nil {
				return err
			}
			if sc, err = adm.AddSource(ctx, sc); err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Portal %q added: %s (source %s).\n", alias, pc.Path, dash(sc.ID))
			return nil
		}),
	}
}

func portalListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list portals",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			sources, err := adm.Sources(ctx)
			if err != nil {
				return err
			}
			portals := portal.Views(sources)
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, portals)
			}
			t := newTable(w)
			fmt.Fprintln(t, "ALIAS\tPATH\tSOURCE")
			for _, p := range portals {
				fmt.Fprintf(t, "%s\t%s\t%s\n", dash(p.Alias), dash(p.Path), p.ID)
			}
			return t.Flush()
		}),
	}
}

func portalRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "stop exposing a portal",
		ArgsUsage: "<alias>",
		Action: withAdmin(1, "<alias>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			alias := cmd.Args().First()
			if err := adm.RemoveSource(ctx, portal.SourcePrefix+alias); err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Portal %q removed.\n", alias)
			return nil
		}),
	}
}
