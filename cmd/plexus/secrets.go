package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

// secretsCommand manages the named secrets that transports present to
// local services (extension spec §7). It works on the files under --home,
// whether the daemon runs or not: the daemon reads a secret only when a
// transport dispatches a call that needs it. A value comes in on stdin only
// (never as an argument, which ps and the shell's history keep) and is
// never printed.
func secretsCommand() *cli.Command {
	return &cli.Command{
		Name:  "secrets",
		Usage: "store the named secrets transports present to local services (secrets/ under --home)",
		Commands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "store a secret; the value is read from stdin (one trailing newline dropped)",
				ArgsUsage: "<name>",
				Action:    secretsSet,
			},
			{
				Name:   "list",
				Usage:  "list the secrets' names (never a value)",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: secretsList,
			},
			{
				Name:      "rm",
				Usage:     "remove a secret",
				ArgsUsage: "<name>",
				Action:    secretsRemove,
			},
		},
	}
}

// newPlatform builds the platform services over --home from what only cmd
// reads: the environment, the user's home directory and the OS.
func newPlatform(cmd *cli.Command) (*platform.Services, error) {
	home := cmd.String("home")
	if home == "" {
		return nil, usageError(cmd, "--home is empty")
	}
	userHome, _ := os.UserHomeDir() // without one, the ~ folders are left out of the PATH
	return platform.New(platform.Options{Home: home, UserHome: userHome, Env: os.Environ(), GOOS: runtime.GOOS}), nil
}

// secretName returns the one argument, a valid secret name.
func secretName(cmd *cli.Command) (string, error) {
	if err := checkArgs(cmd, 1, "<name>"); err != nil {
		return "", err
	}
	name := cmd.Args().First()
	if !platform.ValidSecretName(name) {
		return "", usageError(cmd, "secret name %q: use 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or a digit", name)
	}
	return name, nil
}

func secretsSet(ctx context.Context, cmd *cli.Command) error {
	name, err := secretName(cmd)
	if err != nil {
		return err
	}
	pf, err := newPlatform(cmd)
	if err != nil {
		return err
	}
	b, err := platform.ReadSecretValue(cmd.Root().Reader)
	if errors.Is(err, platform.ErrSecretFromDevice) {
		return &codedError{code: exitUsage, msg: fmt.Sprintf("%v: pipe the value in, e.g. plexus secrets set %s < file", err, name)}
	} else if err != nil {
		return err
	}
	if err := pf.SetSecret(name, b); err != nil {
		return err
	}
	fmt.Fprintf(cmd.Root().Writer, "Secret %s stored (%d bytes) in %s/%s.\n", name, len(b), scaffold.DirSecrets, name)
	return nil
}

func secretsList(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 0, ""); err != nil {
		return err
	}
	pf, err := newPlatform(cmd)
	if err != nil {
		return err
	}
	names, err := pf.Secrets()
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return printJSON(w, names)
	}
	for _, n := range names {
		fmt.Fprintln(w, n)
	}
	return nil
}

func secretsRemove(ctx context.Context, cmd *cli.Command) error {
	name, err := secretName(cmd)
	if err != nil {
		return err
	}
	pf, err := newPlatform(cmd)
	if err != nil {
		return err
	}
	if err := pf.RemoveSecret(name); errors.Is(err, plexus.ErrNotFound) {
		dir := filepath.Join(cmd.String("home"), scaffold.DirSecrets)
		return &codedError{code: exitError, msg: fmt.Sprintf("no secret %s in %s (plexus secrets list shows the names)", name, dir)}
	} else if err != nil {
		return err
	}
	fmt.Fprintf(cmd.Root().Writer, "Secret %s removed.\n", name)
	return nil
}
