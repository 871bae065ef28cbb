package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/plexus-gw/plexus/platform/service"
	"github.com/urfave/cli/v3"
)

func serviceCommand() *cli.Command {
	force := &cli.BoolFlag{Name: "force", Usage: "replace or remove a unit file that differs from the one plexus would write"}
	return &cli.Command{
		Name:  "service",
		Usage: "run plexus serve as a systemd user service (Linux) or launchd agent (macOS)",
		Commands: []*cli.Command{
			{Name: "install", Usage: "write the unit that runs plexus serve with this --home and --addr, restarted on failure",
				Flags: []cli.Flag{force}, Action: serviceInstall},
			{Name: "uninstall", Usage: "remove the unit file", Flags: []cli.Flag{force}, Action: serviceUninstall},
			{Name: "status", Usage: "say whether the unit is installed, and as plexus would write it", Action: serviceStatus},
		},
	}
}

// serviceUnit renders the unit for this system, this binary and the
// --home and --addr in use (no --addr: the daemon reads network.json).
func serviceUnit(cmd *cli.Command) (service.Unit, error) {
	if err := checkArgs(cmd, 0, ""); err != nil {
		return service.Unit{}, err
	}
	kind, err := service.ForOS(runtime.GOOS)
	if err != nil {
		return service.Unit{}, err
	}
	bin, err := os.Executable()
	if err != nil {
		return service.Unit{}, fmt.Errorf("find the plexus binary: %w", err)
	}
	home, err := filepath.Abs(cmd.String("home"))
	if err != nil {
		return service.Unit{}, err
	}
	user, err := os.UserHomeDir()
	if err != nil {
		return service.Unit{}, fmt.Errorf("find your home folder: %w", err)
	}
	spec := service.Spec{Binary: bin, Home: home}
	if cmd.IsSet("addr") {
		spec.Addr = cmd.String("addr")
	}
	return service.Render(kind, user, spec)
}

func serviceInstall(_ context.Context, cmd *cli.Command) error {
	u, err := serviceUnit(cmd)
	if err != nil {
		return err
	}
	changed, err := service.Install(u, cmd.Bool("force"))
	if err != nil {
		return differs(cmd, err, "plexus service install --force")
	}
	w := cmd.Root().Writer
	if changed {
		fmt.Fprintf(w, "Wrote %s: it runs plexus serve for this home, restarted on failure.\n", u.Path)
	} else {
		fmt.Fprintf(w, "%s is already installed, unchanged.\n", u.Path)
	}
	fmt.Fprintf(w, "Start it (and at every login) with:\n  %s\n", u.Start)
	return nil
}

func serviceUninstall(_ context.Context, cmd *cli.Command) error {
	u, err := serviceUnit(cmd)
	if err != nil {
		return err
	}
	removed, err := service.Uninstall(u, cmd.Bool("force"))
	if err != nil {
		return differs(cmd, err, "plexus service uninstall --force")
	}
	w := cmd.Root().Writer
	if !removed {
		fmt.Fprintf(w, "No unit at %s; nothing to remove.\n", u.Path)
		return nil
	}
	fmt.Fprintf(w, "Removed %s. If the service still runs, stop it with:\n  %s\n", u.Path, u.Stop)
	return nil
}

func serviceStatus(_ context.Context, cmd *cli.Command) error {
	u, err := serviceUnit(cmd)
	if err != nil {
		return err
	}
	st, diff, err := service.Inspect(u)
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	switch st {
	case service.Absent:
		fmt.Fprintf(w, "Not installed (no %s). Install it with: plexus service install\n", u.Path)
		return nil
	case service.Same:
		fmt.Fprintf(w, "Installed: %s, as plexus service install writes it for this home.\n", u.Path)
	case service.Differs:
		fmt.Fprintf(w, "Installed: %s, but not as plexus would write it for this home and binary:\n%s", u.Path, diff)
		fmt.Fprintln(w, "plexus service install --force replaces it.")
	}
	fmt.Fprintf(w, "Whether it runs: %s\n", u.Show)
	return nil
}

// differs shows how a unit file differs when err refuses to touch it, and
// names the command that would.
func differs(cmd *cli.Command, err error, forced string) error {
	var de *service.DiffersError
	if !errors.As(err, &de) {
		return err
	}
	fmt.Fprint(cmd.Root().Writer, de.Diff)
	return &codedError{code: exitError, msg: fmt.Sprintf("%v; to replace it with the above, run: %s", err, forced)}
}
