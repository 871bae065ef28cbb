package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/urfave/cli/v3"
)

// mcpLoginCommand signs Plexus in to a remote MCP server (OAuth): the
// daemon runs the flow and takes the browser's redirect itself; the
// command shows the URL, opens it, and waits for the outcome.
func mcpLoginCommand() *cli.Command {
	return &cli.Command{
		Name:  "login",
		Usage: "sign Plexus in to a remote MCP server that asks for it (OAuth), and wait until the source is connected",
		Description: "Prints the authorization URL and opens it in your browser (unless --no-browser). The browser comes back\n" +
			"to Plexus itself on loopback; the tokens are kept with plexus secrets (as oauth.<name>), and no agent ever sees them.",
		ArgsUsage: "<name>",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-browser", Usage: "print the URL only; open it yourself"},
			&cli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "how long to wait for the sign-in (the URL works for 10 minutes)"},
		},
		Action: withAdmin(1, "<name>", mcpLogin),
	}
}

func mcpLogin(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
	name := cmd.Args().First()
	w := cmd.Root().Writer
	login, err := adm.StartMCPLogin(ctx, name)
	if err != nil {
		return termSafe(err)
	}
	switch {
	case login.URL == "":
		fmt.Fprintf(w, "%s signs in with its client's credentials; no browser is needed.\n", inbox.TermSafe(name))
	default:
		fmt.Fprintf(w, "Sign in to %s at this URL (it works until %s):\n%s\n", inbox.TermSafe(name),
			login.ExpiresAt.Local().Format(time.TimeOnly), inbox.TermSafe(login.URL))
	}
	if login.URL != "" && !cmd.Bool("no-browser") {
		page, err := loginPage(cmd.String("home"), name, login.URL)
		if err == nil {
			defer removeLoginPage(page)
			err = openBrowser(page)
		}
		if err != nil {
			fmt.Fprintf(w, "Could not open a browser (%v); open the URL yourself.\n", err)
		} else {
			fmt.Fprintln(w, "Opened it in your browser.")
		}
	}
	fmt.Fprintln(w, "Waiting for the sign-in…")
	deadline := time.Now().Add(cmd.Duration("wait"))
	st, err := adm.WaitMCPLogin(ctx, name, deadline)
	if err != nil {
		return termSafe(err)
	}
	if st.State == plexus.MCPLoginFailed {
		return &codedError{code: exitError, msg: inbox.TermSafe(fmt.Sprintf("The sign-in to %s failed: %s", name, st.Error))}
	}
	last, err := adm.WaitSource(ctx, "mcp:"+name, time.Now().Add(time.Minute), 200*time.Millisecond)
	if err != nil {
		return err
	}
	if !client.SourceUp(last) {
		return &codedError{code: exitError, msg: inbox.TermSafe(fmt.Sprintf("Signed in to %s, but the source is not connected: %s %s",
			name, last.Health.Status, last.Health.Detail))}
	}
	fmt.Fprintf(w, "Signed in to %s; its source mcp:%s is connected with %d entries.\n", name, name, last.Entries)
	return nil
}

// mcpLogoutCommand revokes and deletes a server's tokens.
func mcpLogoutCommand() *cli.Command {
	return &cli.Command{
		Name:      "logout",
		Usage:     "sign Plexus out of a remote MCP server: revoke its tokens where the server offers it, and delete them",
		ArgsUsage: "<name>",
		Action: withAdmin(1, "<name>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			name := cmd.Args().First()
			if _, err := adm.LogoutMCP(ctx, name); err != nil {
				return termSafe(err)
			}
			fmt.Fprintf(cmd.Root().Writer, "Signed out of %s; its tokens are revoked and deleted. Sign in again with: plexus mcp login %s\n", name, name)
			return nil
		}),
	}
}

// termSafeError is an error whose message may quote an authorization
// server (the daemon's answer to a sign-in), made safe to print on the
// owner's terminal; its chain stays for the exit status.
type termSafeError struct{ err error }

func termSafe(err error) error { return termSafeError{err} }

func (e termSafeError) Error() string { return inbox.TermSafe(e.err.Error()) }
func (e termSafeError) Unwrap() error { return e.err }

// loginPages is the private folder of PLEXUS_HOME where the pages that
// forward a browser to an authorization URL lie while a login waits.
const loginPages = ".mcp-login"

var loginPageTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0; url={{.URL}}">
<title>Sign Plexus in to {{.Name}}</title></head>
<body><p><a href="{{.URL}}">Sign Plexus in to {{.Name}}</a></p></body></html>
`))

// loginPage writes a page (0600, in a 0700 folder of home) that forwards
// to the authorization URL, and returns its path. The opener gets the path,
// never the URL: a command line is readable by every local user, and the
// URL's state is what the redirect's credential is bound to.
func loginPage(home, name, authURL string) (string, error) {
	dir := filepath.Join(home, loginPages)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("login page folder: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("login page folder: %w", err)
	}
	var b bytes.Buffer
	if err := loginPageTmpl.Execute(&b, struct{ Name, URL string }{name, authURL}); err != nil {
		return "", fmt.Errorf("login page: %w", err)
	}
	f, err := os.CreateTemp(dir, "login-*.html")
	if err != nil {
		return "", fmt.Errorf("login page: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		return "", errors.Join(fmt.Errorf("login page: %w", err), f.Close(), os.Remove(f.Name()))
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("login page: %w", err)
	}
	return f.Name(), nil
}

// removeLoginPage deletes the page once the login ended: the browser read
// it long before.
func removeLoginPage(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "plexus: remove %s: %v\n", path, err)
	}
}
