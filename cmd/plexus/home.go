package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

// connectionKeyFile is where the daemon keeps the connection-key in its home.
const connectionKeyFile = scaffold.FileConnectionKey

// readConnectionKey reads the owner's connection-key from home.
func readConnectionKey(home string) (string, error) { return scaffold.ReadConnectionKey(home) }

// baseURL turns an --addr (host:port, or a URL) into the gateway's base URL.
func baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return "http://" + addr
}

// gatewayAddr is where the owner's daemon is reached: --addr (or
// PLEXUS_ADDR) when given, else the address the daemon of --home wrote when
// it started listening (daemon.AddressFile), else the default. So `--home X`
// alone reaches a daemon started with `--home X --addr …`.
func gatewayAddr(cmd *cli.Command) (string, error) {
	if cmd.IsSet("addr") {
		return cmd.String("addr"), nil
	}
	addr, ok, err := daemon.ReadAddress(cmd.String("home"))
	if err != nil || !ok {
		return cmd.String("addr"), err
	}
	return addr, nil
}

// notRunning rewrites a failure to connect, or a listener of another user
// at the address, into the owner's next step.
func notRunning(addr string, err error) error {
	var fe *client.ForeignListenerError
	if errors.As(err, &fe) {
		return &codedError{code: exitError, msg: fe.Error()}
	}
	if errors.Is(err, client.ErrUnreachable) {
		return &codedError{code: exitError, msg: fmt.Sprintf("Plexus is not running at %s; start it with: plexus serve", addr)}
	}
	return err
}

// checkArgs fails with a usage error unless cmd got exactly n arguments.
func checkArgs(cmd *cli.Command, n int, names string) error {
	if got := cmd.Args().Len(); got != n {
		if names == "" {
			return usageError(cmd, "%s takes no arguments", cmd.FullName())
		}
		return usageError(cmd, "usage: %s %s", cmd.FullName(), names)
	}
	return nil
}

// ownerAction is an owner command's body, handed a ready admin client.
type ownerAction func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error

// withAdmin checks the argument count (names is the usage line, "" for
// none), builds the admin client from --home and --addr and runs fn.
func withAdmin(n int, names string, fn ownerAction) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		if err := checkArgs(cmd, n, names); err != nil {
			return err
		}
		addr, err := gatewayAddr(cmd)
		if err != nil {
			return err
		}
		key, err := readConnectionKey(cmd.String("home"))
		if err != nil {
			return err
		}
		adm, err := client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
		if err != nil {
			return err
		}
		return notRunning(addr, fn(ctx, cmd, adm))
	}
}

// agentClient builds the agent client over the store in --agent-home. Unless
// --addr (or PLEXUS_ADDR) is given, an enrolled agent dials the gateway it
// enrolled with.
func agentClient(cmd *cli.Command, useStored bool) (*client.Agent, *client.CredStore, string, error) {
	store := client.NewCredStore(cmd.String("agent-home"))
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return nil, nil, "", err
	}
	base := baseURL(addr)
	if useStored && !cmd.IsSet("addr") {
		if c, err := store.Credentials(); err == nil && c.BaseURL != "" {
			base = c.BaseURL
		}
	}
	ag, err := client.NewAgent(base, store, client.WithClientInfo(plexus.ClientInfo{Name: "plexus-cli", Version: plexus.Version}))
	if err != nil {
		return nil, nil, "", err
	}
	return ag, store, strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://"), nil
}

// agentErr explains the agent-side failures a person can act on.
func agentErr(addr string, err error) error {
	if errors.Is(err, client.ErrNotEnrolled) {
		return &codedError{code: exitError, msg: "not enrolled: ask the owner for a code (plexus agents connect <id>), then run: plexus agent enroll <code>"}
	}
	var re *client.RevokedError
	if errors.As(err, &re) {
		return &codedError{code: exitError, msg: fmt.Sprintf("the owner revoked the grant for %s. "+
			"Asking again puts a new request before the owner: say why with --purpose, as in\n"+
			"  plexus agent call %s … --purpose \"what it is for\"", re.CapabilityID, re.CapabilityID)}
	}
	return notRunning(addr, err)
}

// absCommand makes a relative command path absolute: relative to this
// shell's folder, which the daemon does not share. A bare name is left to
// the PATH.
func absCommand(command string) (string, error) {
	if strings.ContainsRune(command, '/') && !filepath.IsAbs(command) {
		return filepath.Abs(command)
	}
	return command, nil
}
