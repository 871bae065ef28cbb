package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemon is a `plexus serve` child in its own home, and the owner's
// commands run against it.
type daemon struct {
	bin, home string
	baseURL   string // http://127.0.0.1:<port>, from the banner
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the child has been waited for
	waitErr   error         // set before exited is closed
	signIns   int           // the owner's sign-ins so far (signInAgain)
}

// startDaemon runs `plexus --home home --addr 127.0.0.1:0 serve` and waits
// for its banner. Its log goes to the driver's stderr.
func startDaemon(ctx context.Context, bin, home string) (*daemon, error) {
	cmd := exec.Command(bin, "--home", home, "--addr", "127.0.0.1:0", "serve")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start plexus serve: %w", err)
	}
	d := &daemon{bin: bin, home: home, cmd: cmd, exited: make(chan struct{})}
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "Plexus is listening on "); ok {
				banner <- strings.Fields(rest)[0]
			}
		}
		// The pipe is drained to its end before Wait, as exec asks.
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	select {
	case d.baseURL = <-banner:
		log.Printf("plexus serve is listening on %s (home %s)", d.baseURL, home)
		return d, nil
	case <-d.exited:
		return nil, fmt.Errorf("plexus serve exited before listening: %v", d.waitErr)
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), d.stop())
	}
}

// stop sends SIGTERM (a clean stop) and, after 10 s, SIGKILL to the
// daemon's process group.
func (d *daemon) stop() error {
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop plexus serve: %w", err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill plexus serve: %w", err)
		}
		<-d.exited
	}
	var ee *exec.ExitError
	if d.waitErr != nil && !errors.As(d.waitErr, &ee) {
		return fmt.Errorf("plexus serve: %w", d.waitErr)
	}
	return nil
}

// plexus runs an owner's command against the daemon (`--home` finds it),
// with stdin, and answers its stdout; a non-zero exit is an error carrying
// both outputs.
func (d *daemon) plexus(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.bin, append([]string{"--home", d.home}, args...)...)
	cmd.Stdin = stdin
	cmd.Env = d.env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	log.Printf("$ plexus %s", strings.Join(args, " "))
	err := cmd.Run()
	if s := strings.TrimSpace(out.String() + errOut.String()); s != "" {
		log.Printf("  %s", strings.ReplaceAll(s, "\n", "\n  "))
	}
	if err != nil {
		return out.String(), fmt.Errorf("plexus %s: %w: %s", args[0], err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// env is the owner's environment for a command: the decider `approve`
// records is the driver.
func (d *daemon) env() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=user.email", "GIT_CONFIG_VALUE_0=conformance@plexus.test")
}

// addServer is `plexus mcp add conf --url URL`, with the --oauth-* flags
// the scenario's client credentials call for. A secret goes into the
// secrets store and mcp.json refers to it, as the owner is told to do.
func (d *daemon) addServer(ctx context.Context, serverURL string, sc scenarioContext, p plan) error {
	// A server that wants sign-in lists nothing before it: add is not
	// kept waiting for entries that cannot come (it says the server needs
	// sign-in either way).
	wait := "10s"
	if p.signIn {
		wait = "1s"
	}
	args := []string{"mcp", "add", serverName, "--url", serverURL, "--wait", wait}
	flags, err := d.oauthFlags(ctx, sc, p)
	if err != nil {
		return err
	}
	// A server that wants sign-in is not listed before it: add says so
	// and exits 1, which is no failure here.
	if _, err := d.plexus(ctx, nil, append(args, flags...)...); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// clientMetadataURL is the Client ID Metadata Document the suite's
// authorization servers know (the Go SDK's conformance client offers the
// same): the owner who hosts one names it with --oauth-client-metadata-url.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// oauthFlags are the `mcp add` flags for a scenario that signs in: the
// owner's Client ID Metadata Document, the pre-registered client the
// context gives (its id, and its secret or private key), and the grant.
func (d *daemon) oauthFlags(ctx context.Context, sc scenarioContext, p plan) ([]string, error) {
	var flags []string
	if p.signIn {
		flags = append(flags, "--oauth-client-metadata-url", clientMetadataURL)
	}
	if sc.ClientID != "" {
		flags = append(flags, "--oauth-client-id", sc.ClientID)
	}
	if sc.ClientSecret != "" {
		if err := d.setSecret(ctx, "conf-client-secret", sc.ClientSecret); err != nil {
			return nil, err
		}
		flags = append(flags, "--oauth-client-secret", "${secret:conf-client-secret}")
	}
	if sc.PrivateKeyPEM != "" {
		if err := d.setSecret(ctx, "conf-private-key", sc.PrivateKeyPEM); err != nil {
			return nil, err
		}
		flags = append(flags, "--oauth-private-key", "${secret:conf-private-key}")
	}
	if p.grant != "" {
		flags = append(flags, "--oauth-grant", p.grant)
	}
	return flags, nil
}

func (d *daemon) setSecret(ctx context.Context, name, value string) error {
	_, err := d.plexus(ctx, strings.NewReader(value), "secrets", "set", name)
	return err
}

// home's agent credential folder.
func (d *daemon) agentHome() string { return filepath.Join(d.home, "agent") }
