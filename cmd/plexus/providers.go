package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/urfave/cli/v3"
)

// providersCommand edits providers.json under --home and, when the daemon
// runs, asks it to apply the file at once (POST
// /admin/api/providers/reload); otherwise the next plexus serve does. The
// file is the one source of truth: a hand edit takes effect with `plexus
// providers reload`.
func providersCommand() *cli.Command {
	return &cli.Command{
		Name:  "providers",
		Usage: "declare the tool-provider processes Plexus launches (ipc; providers.json under --home)",
		Commands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "declare a provider and launch it: plexus providers add <id> [flags] -- <command> [args…]",
				ArgsUsage: "<id> -- <command> [args…]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "restart", Value: plexus.RestartOnFailure, Usage: "restart policy: on-failure, always or never"},
					&cli.StringSliceFlag{Name: "env", Usage: "an environment variable for the provider, `NAME=value`; repeatable"},
					&cli.IntFlag{Name: "max-frame-bytes", Usage: "the provider's frame limit (default 4 MiB)"},
					&cli.BoolFlag{Name: "replace", Usage: "replace a provider declared under the same id (it is restarted)"},
					&cli.DurationFlag{Name: "wait", Value: 10 * time.Second, Usage: "how long to wait for a running daemon to see the provider connect"},
				},
				Action: providersAdd,
			},
			{
				Name:  "list",
				Usage: "list the declared providers, with their live state when the daemon runs",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					if err := checkArgs(cmd, 0, ""); err != nil {
						return err
					}
					return providersList(ctx, cmd)
				},
			},
			{
				Name:      "remove",
				Usage:     "stop a provider and drop its declaration and tools",
				ArgsUsage: "<id>",
				Action:    providersRemove,
			},
			{
				Name:  "reload",
				Usage: "make the running daemon apply providers.json (after editing it by hand)",
				Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
					resp, err := adm.ReloadProviders(ctx)
					if err != nil {
						return err
					}
					ipchost.WriteReload(cmd.Root().Writer, resp)
					return nil
				}),
			},
		},
	}
}

func providersAdd(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() < 2 {
		return usageError(cmd, "usage: %s <id> [flags] -- <command> [args…]", cmd.FullName())
	}
	id, args := cmd.Args().Get(0), cmd.Args().Slice()[2:]
	command, err := absCommand(cmd.Args().Get(1))
	if err != nil {
		return err
	}
	cfg := plexus.ProviderConfig{Command: command, Args: args, Restart: cmd.String("restart"), MaxFrameBytes: int(cmd.Int("max-frame-bytes"))}
	if cfg.Env, err = keyValues(cmd, "env"); err != nil {
		return err
	}
	path := ipchost.Path(cmd.String("home"))
	replaced, err := ipchost.Declare(path, id, cfg, cmd.Bool("replace"))
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	verb := "Declared"
	if replaced {
		verb = "Replaced"
	}
	fmt.Fprintf(w, "%s the provider %s in %s: %s\n", verb, id, path, strings.Join(append([]string{command}, args...), " "))
	adm, running, err := reloadIfRunning(ctx, cmd)
	if err != nil || !running {
		return err
	}
	st, err := adm.WaitProvider(ctx, id, time.Now().Add(cmd.Duration("wait")), 100*time.Millisecond)
	if err != nil {
		return err
	}
	return ipchost.WriteWait(w, id, st, client.ProviderUp(st))
}

func providersRemove(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 1, "<id>"); err != nil {
		return err
	}
	id := cmd.Args().First()
	path := ipchost.Path(cmd.String("home"))
	if err := ipchost.Remove(path, id); err != nil {
		return err
	}
	fmt.Fprintf(cmd.Root().Writer, "Removed the provider %s from %s.\n", id, path)
	_, running, err := reloadIfRunning(ctx, cmd)
	if err == nil && running {
		fmt.Fprintf(cmd.Root().Writer, "Plexus stopped it and dropped its tools.\n")
	}
	return err
}

// reloadIfRunning asks a running daemon to apply providers.json. A daemon
// that is not running (or a home never initialized) is not an error: the
// next plexus serve applies the file.
func reloadIfRunning(ctx context.Context, cmd *cli.Command) (*client.Admin, bool, error) {
	adm, ok := ownerAdmin(cmd)
	if !ok {
		fmt.Fprintln(cmd.Root().Writer, "Plexus is not running; it applies providers.json at the next plexus serve.")
		return nil, false, nil
	}
	resp, err := adm.ReloadProviders(ctx)
	if errors.Is(err, client.ErrUnreachable) {
		fmt.Fprintln(cmd.Root().Writer, "Plexus is not running; it applies providers.json at the next plexus serve.")
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	ipchost.WriteReload(cmd.Root().Writer, resp)
	return adm, true, nil
}

// ownerAdmin is the admin client of --home and --addr, when the home has a
// connection-key.
func ownerAdmin(cmd *cli.Command) (*client.Admin, bool) {
	key, err := readConnectionKey(cmd.String("home"))
	if err != nil {
		return nil, false
	}
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return nil, false
	}
	adm, err := client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
	if err != nil {
		return nil, false
	}
	return adm, true
}

func providersList(ctx context.Context, cmd *cli.Command) error {
	path := ipchost.Path(cmd.String("home"))
	configs := map[string]plexus.ProviderConfig{}
	doc, err := ipchost.ReadFile(path)
	if err == nil {
		configs = doc.Configs()
	} else {
		var fe *ipchost.FileError
		if !errors.As(err, &fe) {
			return err
		}
		// What runs is still worth showing: the daemon keeps what it
		// last loaded.
		fmt.Fprintf(cmd.Root().ErrWriter, "plexus: %v (a running daemon keeps what it last loaded)\n", err)
	}
	live := map[string]plexus.ProviderStatus{}
	running := false
	if adm, ok := ownerAdmin(cmd); ok {
		list, err := adm.Providers(ctx)
		switch {
		case errors.Is(err, client.ErrUnreachable):
		case client.CodeOf(err) == plexus.CodeSourceUnavailable:
			// The daemon runs without ipc (see ipc.unavailable in the
			// journal): say why, and list the file.
			fmt.Fprintf(cmd.Root().ErrWriter, "plexus: %v\n", err)
		case err != nil:
			return err
		default:
			running = true
			for _, s := range list {
				live[s.ID] = s
			}
		}
	}
	rows := ipchost.Rows(configs, live, running)
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return printJSON(w, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "No providers are declared in %s (add one: plexus providers add <id> -- <command> [args…]).\n", path)
		return nil
	}
	return ipchost.WriteRows(w, rows)
}
