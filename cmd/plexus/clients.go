package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/hosts"
	"github.com/plexus-gw/plexus/journal"
	"github.com/urfave/cli/v3"
)

// clientsCommand connects MCP hosts to Plexus: each host becomes an agent
// of its own, and its config file gets one entry, "plexus", that reaches
// the gateway (`plexus mcp serve --agent <id>`, or /mcp with --http).
func clientsCommand() *cli.Command {
	return &cli.Command{
		Name:  "clients",
		Usage: "connect MCP hosts (Claude Code, Cursor, VS Code, Codex, …) to Plexus, each as its own agent",
		Commands: []*cli.Command{
			clientsConnectCommand(),
			clientsDisconnectCommand(),
			clientsListCommand(),
		},
	}
}

// hostFlags select a host's file: the host's own (by --scope) or any file
// (--config, --format).
func hostFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "scope", Value: string(hosts.ScopeUser), Usage: "the host's `user` file, or its `project` file in this folder (.mcp.json, .vscode/mcp.json, .cursor/mcp.json, …)"},
		&cli.StringFlag{Name: "config", Usage: "edit this file instead of the host's own (with --format)"},
		&cli.StringFlag{Name: "format", Usage: "the format of --config: mcpServers, vscode or codex-toml"},
	}
}

// hostTarget is a host, the file of it to edit, and its agent.
type hostTarget struct {
	host  hosts.Host
	path  string
	agent string
	store *client.CredStore
}

// hostEnv is what locating a host's file reads from the environment.
func hostEnv() (hosts.Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return hosts.Env{}, fmt.Errorf("locate the host's file: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return hosts.Env{}, fmt.Errorf("locate the project: %w", err)
	}
	return hosts.Env{GOOS: runtime.GOOS, Home: home, XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		CodexHome: os.Getenv("CODEX_HOME"), ProjectDir: wd}, nil
}

// resolveTarget reads the host argument and the host flags.
func resolveTarget(cmd *cli.Command) (hostTarget, error) {
	if err := checkArgs(cmd, 1, "<host>"); err != nil {
		return hostTarget{}, err
	}
	name := cmd.Args().First()
	var t hostTarget
	if cfg := cmd.String("config"); cfg != "" {
		f, err := hosts.ParseFormat(cmd.String("format"))
		if err != nil {
			return t, usageError(cmd, "--format: %v", err)
		}
		abs, err := filepath.Abs(cfg)
		if err != nil {
			return t, err
		}
		t.host, t.path = hosts.Custom(name, abs, f), abs
		if known, err := hosts.Lookup(name); err == nil && known.Format == f {
			t.host = known // a known host's file elsewhere: its own entry shape
		}
	} else {
		h, err := hosts.Lookup(name)
		if err != nil {
			return t, usageError(cmd, "%v", err)
		}
		env, err := hostEnv()
		if err != nil {
			return t, err
		}
		if t.path, err = h.Path(env, hosts.Scope(cmd.String("scope"))); err != nil {
			return t, usageError(cmd, "%v", err)
		}
		t.host = h
	}
	t.agent = name
	if a := cmd.String("agent"); a != "" {
		t.agent = a
	}
	store, err := client.HostStore(absHome(cmd), t.agent)
	if err != nil {
		return t, usageError(cmd, "--agent: %v", err)
	}
	t.store = store
	return t, nil
}

// absHome is --home made absolute: it is written into a host's file, which
// the host reads from its own working directory.
func absHome(cmd *cli.Command) string {
	home := cmd.String("home")
	if abs, err := filepath.Abs(home); err == nil {
		return abs
	}
	return home
}

// storedPAT is the PAT stored for t's agent, "" when it is not enrolled.
func (t hostTarget) storedPAT() string {
	c, err := t.store.Credentials()
	if err != nil {
		return ""
	}
	return c.PAT
}

// printDiff prints ed's diff with every PAT redacted.
func printDiff(cmd *cli.Command, ed *hosts.Edit, pats ...string) {
	w := cmd.Root().Writer
	if !ed.Changed() {
		fmt.Fprintf(w, "%s already says so; nothing to change.\n", ed.Path)
		return
	}
	fmt.Fprint(w, ed.Diff(pats...))
}

// reportWrite says where the edit went and where the file as it was is.
func reportWrite(cmd *cli.Command, path, backup string) {
	w := cmd.Root().Writer
	if backup != "" {
		fmt.Fprintf(w, "Wrote %s (the file as it was: %s).\n", path, backup)
		return
	}
	fmt.Fprintf(w, "Wrote %s (a new file, mode 0600).\n", path)
}

func clientsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the MCP hosts: installed (config found), connected (a plexus entry), their agents and last calls",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 0, ""); err != nil {
				return err
			}
			env, err := hostEnv()
			if err != nil {
				return err
			}
			rows := hostStatuses(env, absHome(cmd))
			addLastCalls(ctx, cmd.String("home"), rows)
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, rows)
			}
			t := newTable(w)
			fmt.Fprintln(t, "HOST\tINSTALLED\tCONNECTED\tAGENT\tLAST CALL\tCONFIG")
			for _, r := range rows {
				last := "-"
				if r.LastCall != nil {
					last = r.LastCall.Local().Format("2006-01-02 15:04")
				}
				connected := yesNo(r.Connected)
				if r.Problem != "" {
					connected = "? " + r.Problem
				} else if r.Connected {
					connected += " (" + r.Transport + ")"
				}
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Host, yesNo(r.Installed), connected, dash(r.Agent), last, r.Config)
			}
			return t.Flush()
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// hostStatus is one host's file as `clients list` shows it.
type hostStatus struct {
	Host      string     `json:"host"`
	Scope     string     `json:"scope"`
	Config    string     `json:"config"`
	Installed bool       `json:"installed"`
	Connected bool       `json:"connected"`
	Transport string     `json:"transport,omitempty"` // stdio or http
	Agent     string     `json:"agent,omitempty"`
	Enrolled  bool       `json:"enrolled"`
	LastCall  *time.Time `json:"lastCall,omitempty"`
	Problem   string     `json:"problem,omitempty"`
}

// hostStatuses looks at every known host's user file, and its project file
// in this folder when there is one.
func hostStatuses(env hosts.Env, home string) []hostStatus {
	var out []hostStatus
	for _, h := range hosts.Known() {
		for _, scope := range []hosts.Scope{hosts.ScopeUser, hosts.ScopeProject} {
			path, err := h.Path(env, scope)
			if err != nil {
				continue
			}
			s := hostStatus{Host: h.Name, Scope: string(scope), Config: path}
			readStatus(h, home, &s)
			if scope == hosts.ScopeProject && !s.Installed {
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

func readStatus(h hosts.Host, home string, s *hostStatus) {
	cfg, err := hosts.Read(h, s.Config)
	if err != nil {
		s.Installed, s.Problem = !errors.Is(err, os.ErrNotExist), err.Error()
		return
	}
	s.Installed = cfg.Exists()
	p, ok := cfg.Plexus()
	if !ok {
		return
	}
	s.Connected, s.Transport, s.Agent = true, "stdio", h.Name
	if p.Entry.HTTP() {
		s.Transport = "http"
		if id := agentByPAT(home, strings.TrimPrefix(p.Entry.Headers["Authorization"], "Bearer ")); id != "" {
			s.Agent = id
		}
	}
	if i := slices.Index(p.Entry.Args, "--agent"); i >= 0 && i+1 < len(p.Entry.Args) {
		s.Agent = p.Entry.Args[i+1]
	}
	if store, err := client.HostStore(home, s.Agent); err == nil {
		_, err := store.Credentials()
		s.Enrolled = err == nil
	}
}

// agentByPAT is the host agent whose stored credential holds pat, "" when
// none does: an HTTP entry names its agent only by its PAT.
func agentByPAT(home, pat string) string {
	dirs, err := os.ReadDir(filepath.Join(home, client.HostsDir))
	if err != nil || pat == "" {
		return ""
	}
	for _, d := range dirs {
		store, err := client.HostStore(home, d.Name())
		if err != nil {
			continue
		}
		if c, err := store.Credentials(); err == nil && c.PAT == pat {
			return c.AgentID
		}
	}
	return ""
}

// addLastCalls fills in when each row's agent last called, from the
// journal read-only; without a journal the rows say nothing.
func addLastCalls(ctx context.Context, home string, rows []hostStatus) {
	if _, err := os.Stat(filepath.Join(home, "journal.db")); err != nil {
		return
	}
	db, err := openJournalReadOnly(ctx, home)
	if err != nil {
		return
	}
	defer db.Close()
	for i := range rows {
		if rows[i].Agent == "" {
			continue
		}
		last, err := db.Activity(ctx, journal.Filter{AgentID: rows[i].Agent, Type: "invoke.", Limit: 1, Desc: true})
		if err == nil && len(last) == 1 {
			ts := last[0].TS
			rows[i].LastCall = &ts
		}
	}
}

func clientsDisconnectCommand() *cli.Command {
	return &cli.Command{
		Name:      "disconnect",
		Usage:     "remove the plexus entry from a host's file (and with --revoke, its agent)",
		ArgsUsage: "<host>",
		Flags: append(hostFlags(),
			&cli.StringFlag{Name: "agent", Usage: "the host's agent id (default: the host's name)"},
			&cli.BoolFlag{Name: "revoke", Usage: "also revoke the agent and delete its stored credential"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the diff only"},
		),
		Action: clientsDisconnect,
	}
}

func clientsDisconnect(ctx context.Context, cmd *cli.Command) error {
	t, err := resolveTarget(cmd)
	if err != nil {
		return err
	}
	cfg, err := hosts.Read(t.host, t.path)
	if err != nil {
		return err
	}
	ed, err := cfg.Remove()
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if !ed.Changed() || !cfg.Exists() {
		fmt.Fprintf(w, "%s has no plexus entry.\n", t.path)
	} else {
		printDiff(cmd, ed, t.storedPAT())
		if cmd.Bool("dry-run") {
			return nil
		}
		backup, err := ed.Apply()
		if err != nil {
			return err
		}
		reportWrite(cmd, t.path, backup)
	}
	if !cmd.Bool("revoke") || cmd.Bool("dry-run") {
		return nil
	}
	return revokeHostAgent(ctx, cmd, t)
}

// revokeHostAgent revokes t's agent and deletes its stored credential.
func revokeHostAgent(ctx context.Context, cmd *cli.Command, t hostTarget) error {
	adm, err := hostAdmin(cmd)
	if err != nil {
		return err
	}
	resp, err := adm.RevokeAgent(ctx, t.agent, "disconnected from "+t.host.Label)
	if err != nil {
		return notRunning(cmd.String("addr"), err)
	}
	if err := os.RemoveAll(t.store.Dir()); err != nil {
		return fmt.Errorf("delete the credential of %q: %w", t.agent, err)
	}
	fmt.Fprintf(cmd.Root().Writer, "Revoked agent %q (%d sessions ended, %d grants revoked) and deleted its credential %s.\n",
		resp.AgentID, len(resp.RevokedSessions), resp.RevokedGrants, t.store.Dir())
	return nil
}

// hostAdmin is the admin client of --home and --addr; a home without a
// connection-key is an error saying so.
func hostAdmin(cmd *cli.Command) (*client.Admin, error) {
	key, err := readConnectionKey(cmd.String("home"))
	if err != nil {
		return nil, err
	}
	return client.NewAdmin(baseURL(cmd.String("addr")), key, client.WithVia(plexus.ViaCLI))
}

func clientsConnectCommand() *cli.Command {
	return &cli.Command{
		Name:      "connect",
		Usage:     "enroll a host's agent and write the plexus entry into the host's config file",
		ArgsUsage: "<host>",
		Description: "Hosts: claude-code, claude-desktop, cursor, vscode, codex, gemini, windsurf; any other with\n" +
			"--config PATH --format mcpServers|vscode|codex-toml. The host becomes the agent <host> (or --agent),\n" +
			"its credential stored under --home in clients/<agent>/ (0600). The entry launches this binary\n" +
			"(plexus mcp serve --agent <agent>), so no secret enters the host's file; with --http it holds\n" +
			"the URL of /mcp and the agent's PAT instead. The diff is printed first, the file as it was is\n" +
			"kept beside it (<file>.plexus-backup[.N]), and nothing else in the file changes.",
		Flags: append(hostFlags(),
			&cli.StringFlag{Name: "agent", Usage: "the host's agent id (default: the host's name)"},
			&cli.BoolFlag{Name: "http", Usage: "reach Plexus over HTTP (/mcp with the PAT in a header) instead of launching plexus mcp serve"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the diff only: enroll nothing, write nothing"},
			&cli.StringSliceFlag{Name: "grant", Usage: "a starting standing grant, `<capability>[=verbs]`; repeatable"},
			&cli.StringFlag{Name: "window", Usage: "trust window of the starting grants: once, 1h, 1d, 7d, until-revoked or a duration"},
		),
		Action: clientsConnect,
	}
}

// patPlaceholder stands for the PAT in a diff printed before enrollment.
const patPlaceholder = "<the agent's PAT>"

func clientsConnect(ctx context.Context, cmd *cli.Command) error {
	t, err := resolveTarget(cmd)
	if err != nil {
		return err
	}
	cfg, err := hosts.Read(t.host, t.path)
	if err != nil {
		return err
	}
	return connectHost(ctx, cmd, t, cfg, (*hosts.Config).Upsert)
}

// connectHost plans the edit of cfg with plan (the plexus entry added, or
// every entry replaced by it), prints its diff, enrolls t's agent unless
// its credential is stored, and writes the file. An agent already
// enrolled whose file needs no change is a no-op.
func connectHost(ctx context.Context, cmd *cli.Command, t hostTarget, cfg *hosts.Config,
	plan func(*hosts.Config, hosts.Entry) (*hosts.Edit, error)) error {
	grants, err := connectGrants(cmd)
	if err != nil {
		return err
	}
	pat := t.storedPAT()
	entry, err := hostEntry(cmd, t, pat)
	if err != nil {
		return err
	}
	ed, err := plan(cfg, entry)
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if pat != "" && !ed.Changed() {
		fmt.Fprintf(w, "%s is already connected as agent %q (%s; credential in %s). Nothing to do.\n",
			t.host.Label, t.agent, t.path, t.store.Dir())
		return nil
	}
	printDiff(cmd, ed, pat)
	if cmd.Bool("dry-run") {
		fmt.Fprintln(w, "Dry run: no agent enrolled, nothing written.")
		return nil
	}
	if pat == "" {
		if pat, err = enrollHost(ctx, cmd, t, grants); err != nil {
			return err
		}
		if entry, err = hostEntry(cmd, t, pat); err != nil {
			return err
		}
		if ed, err = plan(cfg, entry); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "Agent %q is already enrolled (credential in %s); only the file changes.\n", t.agent, t.store.Dir())
	}
	backup, err := ed.Apply()
	if err != nil {
		return err
	}
	reportWrite(cmd, t.path, backup)
	reportConnected(cmd, t, entry)
	return nil
}

// hostEntry is the plexus entry for t: this binary launched as `mcp serve
// --agent`, or with --http the /mcp URL and a bearer header holding pat (a
// placeholder while the agent is not enrolled).
func hostEntry(cmd *cli.Command, t hostTarget, pat string) (hosts.Entry, error) {
	addr := cmd.String("addr")
	if cmd.Bool("http") {
		if pat == "" {
			pat = patPlaceholder
		}
		return hosts.Entry{URL: "http://" + addr + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + pat}}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return hosts.Entry{}, fmt.Errorf("locate this binary for the host to launch: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return hosts.Entry{}, fmt.Errorf("locate this binary for the host to launch: %w", err)
	}
	args := []string{"--home", absHome(cmd)}
	if addr != defaultAddr {
		args = append(args, "--addr", addr)
	}
	return hosts.Entry{Command: exe, Args: append(args, "mcp", "serve", "--agent", t.agent)}, nil
}

// enrollHost registers t's agent through the admin API and redeems its
// code into t's store; it returns the agent's PAT. An agent of that id
// whose credential was lost is connected again: its new PAT replaces the
// old one.
func enrollHost(ctx context.Context, cmd *cli.Command, t hostTarget, grants []plexus.ConnectGrant) (string, error) {
	adm, err := hostAdmin(cmd)
	if err != nil {
		return "", err
	}
	addr := cmd.String("addr")
	resp, err := adm.Connect(ctx, plexus.ConnectRequest{AgentID: t.agent, Label: t.host.Label, Grants: grants})
	if err != nil {
		return "", notRunning(addr, err)
	}
	ag, err := client.NewAgent(baseURL(addr), t.store, client.WithClientInfo(plexus.ClientInfo{Name: "plexus-clients-connect", Version: plexus.Version}))
	if err != nil {
		return "", err
	}
	if _, err := ag.Enroll(ctx, resp.Code, false); err != nil {
		return "", notRunning(addr, err)
	}
	c, err := t.store.Credentials()
	if err != nil {
		return "", err
	}
	w := cmd.Root().Writer
	fmt.Fprintf(w, "Enrolled agent %q for %s; its credential is in %s (0600).\n", t.agent, t.host.Label, t.store.Dir())
	for _, d := range resp.Declined {
		fmt.Fprintf(w, "Declined grant %s: %s\n", d.ID, d.Reason)
	}
	return c.PAT, nil
}

// reportConnected tells the owner what the host now does.
func reportConnected(cmd *cli.Command, t hostTarget, e hosts.Entry) {
	w := cmd.Root().Writer
	if e.HTTP() {
		fmt.Fprintf(w, "The agent's PAT now sits in %s: anyone who can read that file can act as %q.\n", t.path, t.agent)
	}
	fmt.Fprintf(w, "%s reaches Plexus as agent %q once it reloads its MCP servers. A call it has no grant for waits for you: plexus pending, plexus approve <id>.\n",
		t.host.Label, t.agent)
}
