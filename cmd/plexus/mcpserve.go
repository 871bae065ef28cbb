package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/urfave/cli/v3"
)

// mcpServeCommand is `plexus mcp serve`: a stdio MCP server for a host that
// launches a command, forwarding to the running daemon's /mcp as the agent
// whose credential it reads. No secret goes into the host's config.
func mcpServeCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve an MCP host over stdio as an agent, through the running daemon",
		Description: "Reads the agent's credential from --home's clients/<agent>/ (written by plexus clients connect),\n" +
			"or from --agent-home DIR for an agent enrolled with plexus agent enroll. Speaks MCP on stdin and stdout.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "the agent id whose credential --home's clients/ holds"},
		},
		Action: mcpServe,
	}
}

func mcpServe(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 0, ""); err != nil {
		return err
	}
	store, dir, err := agentCredStore(cmd)
	if err != nil {
		return err
	}
	creds, err := store.Credentials()
	if errors.Is(err, client.ErrNotEnrolled) {
		return &codedError{code: exitError, msg: fmt.Sprintf("no agent credential in %s: connect the host with plexus clients connect, or enroll with plexus agent enroll --agent-home %s", dir, dir)}
	}
	if err != nil {
		return err
	}
	base := creds.BaseURL
	if base == "" || cmd.IsSet("addr") {
		addr, err := gatewayAddr(cmd)
		if err != nil {
			return err
		}
		base = baseURL(addr)
	}
	stdin := processOf(cmd).stdin
	if stdin == nil {
		stdin = os.Stdin
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(bridgeGCPercent)
	}
	// A host that goes may only hang up (SIGHUP): the bridge ends as for
	// SIGTERM and SIGINT (main), cancelling the calls it has in flight
	// before it exits.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	t := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{cmd.Root().Writer}}
	err = mcpserver.Bridge(ctx, t, mcpserver.BridgeOptions{Endpoint: strings.TrimSuffix(base, "/") + "/mcp", PAT: creds.PAT,
		StartHint: "start it with: plexus serve --home " + cmd.String("home")})
	if ctx.Err() != nil {
		return nil // a signal ended it, as the host asked
	}
	return err
}

// bridgeGCPercent is the garbage collector's target of plexus mcp serve
// unless GOGC says otherwise. The bridge keeps a heap of a few MB but
// allocates about 300 KB per call it forwards (the SDK's JSON decoder takes
// a 32 KB buffer for each message it decodes), so at the default of 100 it
// collects every dozen calls; at 400 its calls' throughput through the
// bridge rose by about a tenth (make bench, issue 14), for a few MB more.
const bridgeGCPercent = 400

// agentCredStore is the credential store --agent (the one `plexus clients
// connect` wrote under --home) or --agent-home names, and its directory;
// exactly one must be given.
func agentCredStore(cmd *cli.Command) (*client.CredStore, string, error) {
	agent, home := cmd.String("agent"), cmd.IsSet("agent-home")
	switch {
	case agent != "" && home:
		return nil, "", usageError(cmd, "give --agent or --agent-home, not both")
	case home:
		return client.NewCredStore(cmd.String("agent-home")), cmd.String("agent-home"), nil
	case agent == "":
		return nil, "", usageError(cmd, "usage: plexus mcp serve --agent <id> (or --agent-home DIR)")
	}
	store, err := client.HostStore(cmd.String("home"), agent)
	if err != nil {
		return nil, "", usageError(cmd, "--agent %q is not an agent id", agent)
	}
	return store, filepath.Join(cmd.String("home"), client.HostsDir, agent), nil
}

// nopWriteCloser lets the command's stdout serve as the transport's
// writer without the transport closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
