package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/transports/ipc"
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
					printReload(cmd, resp)
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
	id, command, args := cmd.Args().Get(0), cmd.Args().Get(1), cmd.Args().Slice()[2:]
	if strings.ContainsRune(command, '/') && !filepath.IsAbs(command) {
		// A relative path means the caller's folder, which the daemon
		// does not share: make it absolute now.
		abs, err := filepath.Abs(command)
		if err != nil {
			return err
		}
		command = abs
	}
	cfg := plexus.ProviderConfig{Command: command, Args: args, Restart: cmd.String("restart"), MaxFrameBytes: int(cmd.Int("max-frame-bytes"))}
	env, err := keyValues(cmd, "env")
	if err != nil {
		return err
	}
	cfg.Env = env
	path := ipchost.Path(cmd.String("home"))
	doc, err := ipchost.ReadFile(path)
	if err != nil {
		return err
	}
	_, exists := doc.Configs()[id]
	if exists && !cmd.Bool("replace") {
		return failure("a provider %q is already declared; use --replace to change it, or plexus providers remove %s", id, id)
	}
	if err := doc.Set(id, cfg); err != nil {
		var ce *ipc.ConfigError
		if errors.As(err, &ce) {
			return failure("%v; nothing was written", err)
		}
		return err
	}
	if err := doc.Save(); err != nil {
		return err
	}
	w := cmd.Root().Writer
	verb := "Declared"
	if exists {
		verb = "Replaced"
	}
	fmt.Fprintf(w, "%s the provider %s in %s: %s\n", verb, id, path, strings.Join(append([]string{command}, args...), " "))
	adm, running, err := reloadIfRunning(ctx, cmd)
	if err != nil || !running {
		return err
	}
	return waitForProvider(ctx, cmd, adm, id, cmd.Duration("wait"))
}

func providersRemove(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 1, "<id>"); err != nil {
		return err
	}
	id := cmd.Args().First()
	path := ipchost.Path(cmd.String("home"))
	doc, err := ipchost.ReadFile(path)
	if err != nil {
		return err
	}
	if !doc.Remove(id) {
		return failure("no provider %q in %s (see: plexus providers list)", id, path)
	}
	if err := doc.Save(); err != nil {
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
	printReload(cmd, resp)
	return adm, true, nil
}

// ownerAdmin is the admin client of --home and --addr, when the home has a
// connection-key.
func ownerAdmin(cmd *cli.Command) (*client.Admin, bool) {
	key, err := readConnectionKey(cmd.String("home"))
	if err != nil {
		return nil, false
	}
	adm, err := client.NewAdmin(baseURL(cmd.String("addr")), key, client.WithVia(plexus.ViaCLI))
	if err != nil {
		return nil, false
	}
	return adm, true
}

func printReload(cmd *cli.Command, resp plexus.ProvidersReloadResponse) {
	w := cmd.Root().Writer
	for _, x := range []struct {
		what string
		ids  []string
	}{{"started", resp.Added}, {"restarted", resp.Restarted}, {"stopped", resp.Removed}} {
		if len(x.ids) > 0 {
			fmt.Fprintf(w, "Plexus %s: %s\n", x.what, strings.Join(x.ids, ", "))
		}
	}
	if len(resp.Added)+len(resp.Restarted)+len(resp.Removed) == 0 {
		fmt.Fprintln(w, "Plexus already runs what providers.json declares.")
	}
}

// waitForProvider reports what a running daemon made of provider id: its
// tools once it connected and registered, or why it is down.
func waitForProvider(ctx context.Context, cmd *cli.Command, adm *client.Admin, id string, limit time.Duration) error {
	w := cmd.Root().Writer
	deadline := time.Now().Add(limit)
	var st plexus.ProviderStatus
	for {
		list, err := adm.Providers(ctx)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.ID == id {
				st = s
			}
		}
		switch {
		case st.State == plexus.ProviderConnected && len(st.Tools) > 0:
			fmt.Fprintf(w, "Provider %s connected (pid %d, %s): %d tool(s):\n", id, st.PID, dash(st.AgentVersion), len(st.Tools))
			for _, t := range st.Tools {
				fmt.Fprintf(w, "  %s\n", t)
			}
			return nil
		case st.State == plexus.ProviderExited:
			return failure("provider %s is down: %s (see the daemon's log)", id, st.LastExit)
		case time.Now().After(deadline):
			fmt.Fprintf(w, "Provider %s is %s (%s); see: plexus providers list\n", id, dash(st.State), dash(st.Health.Detail))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	t := newTable(w)
	fmt.Fprintln(t, "ID\tSTATE\tHEALTH\tTOOLS\tRESTARTS\tCOMMAND")
	for _, r := range rows {
		health := "-"
		if r.Running {
			health = string(r.Health.Status)
			if r.Health.Detail != "" {
				health += " (" + r.Health.Detail + ")"
			}
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.State, health, len(r.Tools), r.Restarts,
			strings.Join(append([]string{r.Command}, r.Args...), " "))
	}
	return t.Flush()
}
