package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
)

// urlPattern finds the authorization URL in `mcp login`'s output.
var urlPattern = regexp.MustCompile(`https?://\S+`)

// signInAgain is the owner signing in until the server is connected: a
// sign-in after which the server asks for more (a step-up) is followed by
// another, signInsMax in the scenario at most.
func (d *daemon) signInAgain(ctx context.Context) error {
	for {
		err := d.signIn(ctx)
		d.signIns++
		if err == nil || d.signIns >= signInsMax {
			return err
		}
		needs, lerr := d.needsSignIn(ctx)
		if lerr != nil || !needs {
			return errors.Join(err, lerr)
		}
	}
}

// signIn is `plexus mcp login conf --no-browser`, the driver being the
// owner's browser: it opens the authorization URL the command prints (the
// suite's authorization server answers at once with a redirect carrying
// the code) and follows the redirect back to the daemon's callback, then
// waits for the command to say the source is connected.
func (d *daemon) signIn(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := []string{"--home", d.home, "mcp", "login", serverName, "--no-browser"}
	log.Printf("$ plexus %s", strings.Join(args[2:], " "))
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Env = d.env()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("plexus mcp login: %w", err)
	}
	browsed := make(chan error, 1)
	go func() { browsed <- d.browseFirstURL(ctx, out) }()
	browseErr := <-browsed // the output is read to its end before Wait
	err = cmd.Wait()
	if s := strings.TrimSpace(errOut.String()); s != "" {
		log.Printf("  %s", strings.ReplaceAll(s, "\n", "\n  "))
	}
	if err != nil {
		return errors.Join(fmt.Errorf("plexus mcp login: %w: %s", err, strings.TrimSpace(errOut.String())), browseErr)
	}
	return browseErr
}

// needsSignIn reports whether `plexus mcp list` says the server needs the
// owner to sign in.
func (d *daemon) needsSignIn(ctx context.Context) (bool, error) {
	out, err := d.plexus(ctx, nil, "mcp", "list", "--json")
	if err != nil {
		return false, err
	}
	var items []struct {
		Name   string `json:"name"`
		Source *struct {
			Health struct {
				NeedsSignIn bool `json:"needsSignIn"`
			} `json:"health"`
		} `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &items); err != nil {
		return false, fmt.Errorf("mcp list --json: %w", err)
	}
	for _, it := range items {
		if it.Name == serverName && it.Source != nil {
			return it.Source.Health.NeedsSignIn, nil
		}
	}
	return false, nil
}

// browseFirstURL logs every line of out and opens the first URL in it
// that is not the daemon's own, as a browser would; it reads out to its end.
func (d *daemon) browseFirstURL(ctx context.Context, out io.Reader) error {
	var err error
	opened := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		log.Printf("  %s", line)
		u := urlPattern.FindString(line)
		if opened || u == "" || strings.HasPrefix(u, d.baseURL) {
			continue
		}
		opened = true
		err = browse(ctx, u)
	}
	if !opened {
		return errors.Join(err, errors.New("plexus mcp login printed no authorization URL"))
	}
	return errors.Join(err, sc.Err())
}

// browse opens the authorization URL without following its redirect, then
// opens where it redirects (the daemon's /oauth/callback), as the browser
// would after the owner approved.
func browse(ctx context.Context, authURL string) error {
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	log.Printf("browser: GET %s", authURL)
	resp, err := get(ctx, noFollow, authURL)
	if err != nil {
		return err
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return fmt.Errorf("the authorization server answered %s, no redirect", resp.Status)
	}
	log.Printf("browser: redirected to %s", loc)
	resp, err = get(ctx, http.DefaultClient, loc)
	if err != nil {
		return err
	}
	log.Printf("browser: the callback answered %s", resp.Status)
	return nil
}

func get(ctx context.Context, c *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	// The body is read so the connection is reused; what it says is the
	// status.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, errors.Join(fmt.Errorf("read %s: %w", u, err), resp.Body.Close())
	}
	return resp, resp.Body.Close()
}
