package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/registry"
	"github.com/urfave/cli/v3"
)

func extCommand() *cli.Command {
	return &cli.Command{
		Name:     "ext",
		Usage:    "write, check and register extensions (one JSON manifest each)",
		Commands: []*cli.Command{extValidateCommand(), extAddCommand(), extListCommand(), extRemoveCommand()},
	}
}

func extValidateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a manifest against every rule of plexus-extension/0.1; exits 1 when it breaks one",
		ArgsUsage: "<manifest.json>",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the problems as JSON"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<manifest.json>"); err != nil {
				return err
			}
			m, err := registry.ReadManifest(cmd.Args().First())
			if err == nil {
				err = registry.ValidateManifest(m, nil)
			}
			return reportManifest(cmd, m, err)
		},
	}
}

func extAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "register an extension (managed: you added it); adding one of yours again replaces it in place",
		ArgsUsage: "<manifest.json>",
		Action: withAdmin(1, "<manifest.json>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			m, err := registry.ReadManifest(cmd.Args().First())
			if err == nil {
				err = registry.ValidateManifest(m, nil) // offline first: every problem at once
			}
			if err != nil {
				return reportManifest(cmd, m, err)
			}
			sc, replaced, err := adm.AddExtension(ctx, m)
			if err != nil {
				return err
			}
			verb := "added"
			if replaced {
				verb = "re-registered"
			}
			w := cmd.Root().Writer
			fmt.Fprintf(w, "Extension %s %s (%s, managed):\n", sc.ID, verb, m.Label)
			// The verbs Plexus requires, not only the declared ones (docs/trust.md).
			verbs, why := registry.DeclVerbs(m, nil, nil)
			for i, d := range m.Capabilities {
				fmt.Fprintf(w, "  %s  %s  %s", registry.EntryID(m.Source, d.Name), d.Kind, dash(client.VerbsString(verbs[i])))
				if !slices.Equal(verbs[i], plexus.NormalizeVerbs(d.Grants)) {
					fmt.Fprintf(w, "  (declared %s: %s)", dash(client.VerbsString(d.Grants)), inbox.TermSafe(why[i]))
				}
				fmt.Fprintln(w)
			}
			return nil
		}),
	}
}

func extListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the extensions you added",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			ms, err := adm.Extensions(ctx)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				if ms == nil {
					ms = []plexus.ExtensionManifest{}
				}
				return printJSON(w, ms)
			}
			return client.WriteExtensions(w, ms)
		}),
	}
}

func extRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "unregister an extension you added, revoking every grant of its entries; it does not come back at the next start",
		ArgsUsage: "<source>",
		Action: withAdmin(1, "<source>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			id := cmd.Args().First()
			if err := adm.RemoveExtension(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Extension %s removed.\n", id)
			return nil
		}),
	}
}

// reportManifest prints a manifest's problems (or that it is valid) and
// turns them into exit status 1.
func reportManifest(cmd *cli.Command, m plexus.ExtensionManifest, err error) error {
	rep, ok := registry.ReportOf(m, err)
	if !ok {
		return err
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		if err := printJSON(w, rep); err != nil {
			return err
		}
	} else {
		registry.WriteReport(w, m, rep)
	}
	if !rep.Valid {
		return &codedError{code: exitError}
	}
	return nil
}
