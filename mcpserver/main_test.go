package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// bridgeEnv makes the test binary the stdio bridge of `plexus mcp serve`
// (mcpserver.Bridge on its stdin and stdout, to BRIDGE_ENDPOINT with
// BRIDGE_PAT), for a host that launches a command.
const bridgeEnv = "MCPSERVER_TEST_BRIDGE"

// askerEnv makes the test binary the asker MCP server (relay_test.go) on
// its stdin and stdout.
const askerEnv = "MCPSERVER_TEST_ASKER"

func TestMain(m *testing.M) {
	if os.Getenv(askerEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := (&asker{}).server().Run(ctx, &mcp.StdioTransport{})
		stop()
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "asker:", err)
		}
		os.Exit(0)
	}
	if os.Getenv(bridgeEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := mcpserver.Bridge(ctx, &mcp.StdioTransport{}, mcpserver.BridgeOptions{
			Endpoint: os.Getenv("BRIDGE_ENDPOINT"), PAT: os.Getenv("BRIDGE_PAT")})
		stop()
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "bridge:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
