// Command client is the driver the MCP conformance suite runs in client
// mode (e2e's TestConformanceClient, `make conformance`): Plexus used as its
// owner would use it, to be the MCP client the suite's test server judges.
//
// The suite starts a test server per scenario and runs
//
//	client -plexus /path/to/plexus <server-url>
//
// with MCP_CONFORMANCE_SCENARIO (the scenario's name) and, for some,
// MCP_CONFORMANCE_CONTEXT (JSON: client credentials, the calls to make) in
// the environment. The driver then does what an owner and an agent do:
//
//  1. starts the real daemon (`plexus serve`) in a fresh PLEXUS_HOME;
//  2. `plexus mcp add conf --url <server-url>`, with the `--oauth-*` flags
//     when the context carries client credentials (a secret through
//     `plexus secrets set`, referred to as ${secret:NAME});
//  3. for a server that wants sign-in, `plexus mcp login conf --no-browser`,
//     and acts as the browser: it opens the printed authorization URL and
//     follows the redirect back to the daemon's /oauth/callback;
//  4. enrolls an agent with standing grants on every entry
//     (`plexus agents connect --grant 'mcp.conf.*=read,write'`), approving
//     any call that needs the owner (`plexus approve`);
//  5. makes the /invoke calls the scenario expects of a client (the Go
//     SDK's own conformance client, conformance/everything-client, is the
//     model), through Plexus's agent client;
//  6. stops the daemon.
//
// It prints what it does on stderr (the suite keeps it in stderr.txt) and
// exits 1 when a step fails. It is a test harness: never a part of a
// daemon, never run by one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// serverName is the name the scenario's server gets in mcp.json: its
// entries are mcp.conf.*.
const serverName = "conf"

func main() {
	plexusBin := flag.String("plexus", "plexus", "the plexus binary to drive")
	timeout := flag.Duration("timeout", 40*time.Second, "give up after this long (the suite is told 90 s)")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatalf("usage: %s [-plexus PATH] <server-url> (MCP_CONFORMANCE_SCENARIO in the environment)", os.Args[0])
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if scenario == "" {
		log.Fatal("MCP_CONFORMANCE_SCENARIO is not set")
	}
	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			log.Fatalf("MCP_CONFORMANCE_CONTEXT: %v", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	log.SetPrefix("driver: ")
	log.SetFlags(log.Lmicroseconds)
	if err := run(ctx, *plexusBin, flag.Arg(0), scenario, sc); err != nil {
		log.Printf("scenario %s: %v", scenario, err)
		os.Exit(1)
	}
	log.Printf("scenario %s: done", scenario)
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT: what the suite tells the
// client beside the URL.
type scenarioContext struct {
	ClientID      string     `json:"client_id"`
	ClientSecret  string     `json:"client_secret"`
	PrivateKeyPEM string     `json:"private_key_pem"`
	ToolCalls     []toolCall `json:"toolCalls"`
}

type toolCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// run is one scenario, start to finish: the daemon is stopped whatever
// happened.
func run(ctx context.Context, plexusBin, serverURL, scenario string, sc scenarioContext) (err error) {
	home, err := os.MkdirTemp("", "plexus-conformance-")
	if err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(home); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	d, err := startDaemon(ctx, plexusBin, home)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := d.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	p := planFor(scenario)
	if err := d.addServer(ctx, serverURL, sc, p); err != nil {
		return err
	}
	if p.signIn {
		if err := d.signInAgain(ctx); err != nil {
			return err
		}
	}
	a, err := d.enroll(ctx)
	if err != nil {
		return err
	}
	return p.play(ctx, a, sc)
}
