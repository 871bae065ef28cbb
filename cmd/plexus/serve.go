package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/plexus-gw/plexus/daemon"
	"github.com/urfave/cli/v3"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the gateway in the foreground (initializes --home on first start)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "debug", Usage: "log every request (never credentials or bodies)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			level := slog.LevelInfo
			if cmd.Bool("debug") {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: level}))
			addr := ""
			if cmd.IsSet("addr") {
				addr = cmd.String("addr")
			}
			// The banner, the address file and the service unit name the
			// home the daemon really uses, whatever folder this ran from.
			home, err := filepath.Abs(cmd.String("home"))
			if err != nil {
				return err
			}
			d, err := daemon.Start(ctx, daemon.Options{Home: home, Addr: addr, Logger: log,
				Owner: sync.OnceValue(processOf(cmd).decider)})
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			fmt.Fprintf(w, "Plexus is listening on %s (home %s)\n", d.BaseURL(), home)
			fmt.Fprintf(w, "  address file:   %s (commands given this home find the daemon by it)\n", filepath.Join(home, daemon.AddressFile))
			fmt.Fprintf(w, "  discovery:      %s/.well-known/plexus\n", d.BaseURL())
			fmt.Fprintf(w, "  connect agent:  plexus agents connect <agent-id>\n")
			fmt.Fprintf(w, "  expose folder:  plexus portal add <path> <alias>\n")
			fmt.Fprintf(w, "  console:        plexus console (opens %s/console/, signed in by a one-time link)\n", d.BaseURL())
			fmt.Fprintf(w, "  journal:        plexus journal --follow\n")
			fmt.Fprintln(w, "Stop with Ctrl-C.")
			if f, ok := w.(*os.File); ok {
				_ = f.Sync() // a terminal or a pipe cannot be synced (EINVAL): the banner is best effort
			}
			err = d.Run(ctx)
			log.Info("stopped")
			return err
		},
	}
}
