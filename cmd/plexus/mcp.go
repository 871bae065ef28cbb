package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/mcphost"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/urfave/cli/v3"
)

// mcpCommand edits mcp.json under --home. The daemon watches the file and
// starts, restarts or stops servers as it changes, so the commands work
// whether it runs or not; when it runs, add waits to say what it found.
func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "wrap MCP servers as sources (mcp.json under --home, the mcpServers format other MCP hosts use)",
		Commands: []*cli.Command{
			{
				Name:  "add",
				Usage: "add a server: plexus mcp add <name> -- <command> [args…], or plexus mcp add <name> --url <url>",
				Description: "A value of --env or --header may name a secret instead of holding it: --env GITHUB_TOKEN='${secret:github}'\n" +
					"(store it with plexus secrets set github). The server's tools, resources and prompts appear as entries\n" +
					"mcp.<name>.…; their definitions are pinned now, and a definition that changes later is held until you approve it.",
				ArgsUsage: "<name> [-- <command> [args…]]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "url", Usage: "the server's Streamable HTTP endpoint, instead of a command"},
					&cli.StringSliceFlag{Name: "env", Usage: "KEY=VALUE for the server's environment (repeatable)"},
					&cli.StringSliceFlag{Name: "header", Usage: "Name=Value sent with every HTTP request (repeatable)"},
					&cli.StringFlag{Name: "oauth-client-id", Usage: "sign in with this pre-registered OAuth client id (url servers)"},
					&cli.StringFlag{Name: "oauth-client-secret", Usage: "the client's secret, as ${secret:NAME} (never the value)"},
					&cli.StringFlag{Name: "oauth-private-key", Usage: "the client's private key for private_key_jwt, as ${secret:NAME}"},
					&cli.StringFlag{Name: "oauth-client-metadata-url", Usage: "the https URL of a Client ID Metadata Document you host"},
					&cli.StringFlag{Name: "oauth-scopes", Usage: "the scopes to ask for, space-separated (default: what the server asks)"},
					&cli.StringFlag{Name: "oauth-grant", Usage: "authorization_code (default: you sign in with plexus mcp login) or client_credentials (no person)"},
					&cli.IntFlag{Name: "oauth-callback-port", Usage: "a fixed loopback port for the sign-in redirect (default: the daemon's own)"},
					&cli.StringFlag{Name: "oauth-auth-server-metadata-url", Usage: "the authorization server's metadata URL, skipping discovery"},
					&cli.BoolFlag{Name: "replace", Usage: "replace a server of that name"},
					&cli.DurationFlag{Name: "wait", Value: 15 * time.Second, Usage: "how long to wait for a running daemon to list the server"},
				},
				Action: mcpAdd,
			},
			{
				Name:  "list",
				Usage: "list the servers in mcp.json, and what a running daemon serves of each",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return mcpList(ctx, cmd)
				},
			},
			{
				Name:      "remove",
				Usage:     "remove a server; its entries leave the manifest, its pins are forgotten and its sign-in tokens revoked and deleted",
				ArgsUsage: "<name>",
				Action:    mcpRemove,
			},
			mcpLoginCommand(),
			mcpLogoutCommand(),
			mcpServeCommand(),
			mcpImportCommand(),
		},
	}
}

func mcpPath(cmd *cli.Command) (string, error) {
	home := cmd.String("home")
	if home == "" {
		return "", usageError(cmd, "--home is empty")
	}
	return filepath.Join(home, scaffold.FileMCPConfig), nil
}

// keyValues parses KEY=VALUE flags.
func keyValues(cmd *cli.Command, flag string) (map[string]string, error) {
	vals := cmd.StringSlice(flag)
	if len(vals) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(vals))
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError(cmd, "--%s %q: write KEY=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func mcpAdd(ctx context.Context, cmd *cli.Command) error {
	args := cmd.Args().Slice()
	if len(args) == 0 {
		return usageError(cmd, "usage: %s <name> -- <command> [args…] | <name> --url <url>", cmd.FullName())
	}
	name, rest := args[0], args[1:]
	url, command := cmd.String("url"), ""
	switch {
	case url != "" && len(rest) > 0:
		return usageError(cmd, "give a command after -- or --url, not both")
	case url == "" && len(rest) == 0:
		return usageError(cmd, "give the server's command after --, or its --url")
	case url == "":
		var err error
		if command, err = absCommand(rest[0]); err != nil {
			return err
		}
		rest = rest[1:]
	}
	env, err := keyValues(cmd, "env")
	if err != nil {
		return err
	}
	headers, err := keyValues(cmd, "header")
	if err != nil {
		return err
	}
	raw, err := mcphost.EntryOf(command, rest, url, env, headers, oauthFlags(cmd))
	if err != nil {
		return err
	}
	path, err := mcpPath(cmd)
	if err != nil {
		return err
	}
	s, err := mcphost.ParseServer(path, name, raw)
	if err != nil {
		return &codedError{code: exitUsage, msg: err.Error()}
	}
	if err := mcphost.Add(path, name, raw, cmd.Bool("replace"), missingSecrets(cmd, s)); err != nil {
		return err
	}
	w := cmd.Root().Writer
	fmt.Fprintf(w, "Added the MCP server %s to %s (%s).\n", name, path, s.Describe())
	return waitForServer(ctx, cmd, name)
}

// oauthFlags is the "oauth" object the --oauth-* flags describe, nil when
// none is given. ParseServer checks it (a literal secret is refused there).
func oauthFlags(cmd *cli.Command) *mcphost.OAuth {
	o := mcphost.OAuth{
		ClientID:              cmd.String("oauth-client-id"),
		ClientSecret:          cmd.String("oauth-client-secret"),
		PrivateKey:            cmd.String("oauth-private-key"),
		ClientMetadataURL:     cmd.String("oauth-client-metadata-url"),
		Scopes:                strings.Fields(cmd.String("oauth-scopes")),
		Grant:                 cmd.String("oauth-grant"),
		CallbackPort:          int(cmd.Int("oauth-callback-port")),
		AuthServerMetadataURL: cmd.String("oauth-auth-server-metadata-url"),
	}
	set := false
	for _, f := range cmd.FlagNames() {
		set = set || strings.HasPrefix(f, "oauth-") && cmd.IsSet(f)
	}
	if !set {
		return nil
	}
	return &o
}

// missingSecrets lists the secrets s refers to that are not stored.
func missingSecrets(cmd *cli.Command, s mcphost.Server) []string {
	pf, err := newPlatform(cmd)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range s.SecretNames() {
		if _, err := pf.Secret(n); err != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitForServer tells what a running daemon made of the new server: its
// entries once listed, or its health while it does not come up.
func waitForServer(ctx context.Context, cmd *cli.Command, name string) error {
	w := cmd.Root().Writer
	const notRunning = "Plexus is not running; it starts the server at the next plexus serve."
	key, err := readConnectionKey(cmd.String("home"))
	if err != nil {
		fmt.Fprintln(w, notRunning) // the home was never served
		return nil
	}
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return err
	}
	adm, err := client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
	if err != nil {
		return err
	}
	last, err := adm.WaitSource(ctx, "mcp:"+name, time.Now().Add(cmd.Duration("wait")), 200*time.Millisecond)
	switch {
	case errors.Is(err, client.ErrUnreachable):
		fmt.Fprintln(w, notRunning)
	case err != nil:
		return err
	default:
		mcphost.WriteWait(w, name, last, client.SourceUp(last))
	}
	return nil
}

func mcpList(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 0, ""); err != nil {
		return err
	}
	path, err := mcpPath(cmd)
	if err != nil {
		return err
	}
	doc, err := mcphost.ReadFile(path)
	if err != nil {
		return err
	}
	live, running := liveSources(ctx, cmd)
	items := mcphost.ListItems(doc, live, func(s mcphost.Server) []string { return missingSecrets(cmd, s) })
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		if items == nil {
			items = []mcphost.ListItem{}
		}
		return printJSON(w, items)
	}
	if len(items) == 0 {
		fmt.Fprintf(w, "No MCP servers in %s. Add one with: plexus mcp add <name> -- <command> [args…]\n", path)
		return nil
	}
	return mcphost.WriteList(w, items, running)
}

// liveSources asks a running daemon for its sources' status; running is
// false (and the map nil) when no daemon answers.
func liveSources(ctx context.Context, cmd *cli.Command) (map[string]plexus.SourceStatus, bool) {
	adm, ok := ownerAdmin(cmd)
	if !ok {
		return nil, false
	}
	return adm.LiveSources(ctx)
}

func mcpRemove(ctx context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 1, "<name>"); err != nil {
		return err
	}
	name := cmd.Args().First()
	path, err := mcpPath(cmd)
	if err != nil {
		return err
	}
	doc, err := mcphost.ReadFile(path)
	if err != nil {
		return err
	}
	if _, ok := doc.Entry(name); !ok {
		return mcphost.Remove(path, name) // says there is no such server
	}
	signedOut, err := mcpSignOut(ctx, cmd, name)
	if err != nil {
		return err
	}
	if err := mcphost.Remove(path, name); err != nil {
		return err
	}
	fmt.Fprintf(cmd.Root().Writer, "Removed the MCP server %s from %s; a running Plexus stops it and drops its entries.\n", name, path)
	if signedOut != "" {
		fmt.Fprintln(cmd.Root().Writer, signedOut)
	}
	return nil
}

// mcpSignOut ends the sign-in of a server being removed: through a
// running daemon (which revokes the tokens at the server), else by
// deleting the stored tokens. It says what it did ("" when there was
// nothing to sign out of).
func mcpSignOut(ctx context.Context, cmd *cli.Command, name string) (string, error) {
	if adm, ok := ownerAdmin(cmd); ok {
		_, err := adm.LogoutMCP(ctx, name)
		switch {
		case err == nil:
			return "Its sign-in tokens are revoked and deleted.", nil
		case client.CodeOf(err) == plexus.CodeNotFound:
			return "", nil // not a server that signs in
		case !errors.Is(err, client.ErrUnreachable):
			return "", err
		}
	}
	pf, err := newPlatform(cmd)
	if err != nil {
		return "", err
	}
	if err := pf.RemoveSecret(mcpTokensSecret(name)); err != nil {
		if errors.Is(err, plexus.ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	return "Its sign-in tokens are deleted (Plexus is not running, so they were not revoked at the server).", nil
}

// mcpTokensSecret is the secret that holds server name's OAuth tokens.
func mcpTokensSecret(name string) string { return "oauth." + name }
