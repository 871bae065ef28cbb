package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

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

// hostTarget is a host's file as read, and the host's agent.
type hostTarget struct {
	cfg   *hosts.Config
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

// resolveTarget reads the host argument and the host flags, and the host's
// file.
func resolveTarget(cmd *cli.Command) (hostTarget, error) {
	if err := checkArgs(cmd, 1, "<host>"); err != nil {
		return hostTarget{}, err
	}
	name := cmd.Args().First()
	h, path, err := locateHost(cmd, name)
	if err != nil {
		return hostTarget{}, err
	}
	t := hostTarget{agent: cmp.Or(cmd.String("agent"), name)}
	if t.store, err = client.HostStore(absHome(cmd), t.agent); err != nil {
		return t, usageError(cmd, "--agent: %v", err)
	}
	t.cfg, err = hosts.Read(h, path)
	return t, err
}

// locateHost is the host name and its file: --config's, or the host's own.
func locateHost(cmd *cli.Command, name string) (hosts.Host, string, error) {
	if cfg := cmd.String("config"); cfg != "" {
		f, err := hosts.ParseFormat(cmd.String("format"))
		if err != nil {
			return hosts.Host{}, "", usageError(cmd, "--format: %v", err)
		}
		abs, err := filepath.Abs(cfg)
		return hosts.ForFile(name, abs, f), abs, err
	}
	h, err := hosts.Lookup(name)
	if err != nil {
		return h, "", usageError(cmd, "%v", err)
	}
	env, err := hostEnv()
	if err != nil {
		return h, "", err
	}
	path, err := h.Path(env, hosts.Scope(cmd.String("scope")))
	if err != nil {
		return h, "", usageError(cmd, "%v", err)
	}
	return h, path, nil
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
			rows := hosts.Statuses(env, client.HostAgents(absHome(cmd)))
			addLastCalls(ctx, cmd.String("home"), rows)
			if cmd.Bool("json") {
				return printJSON(cmd.Root().Writer, rows)
			}
			return hosts.WriteStatuses(cmd.Root().Writer, rows)
		},
	}
}

// addLastCalls fills in when each row's agent last called, from the
// journal read-only; without a journal the rows say nothing.
func addLastCalls(ctx context.Context, home string, rows []hosts.Status) {
	db, err := openJournalReadOnly(ctx, home)
	if err != nil {
		return
	}
	defer db.Close()
	for i, r := range rows {
		if r.Agent == "" {
			continue
		}
		last, err := db.Activity(ctx, journal.Filter{AgentID: r.Agent, Type: "invoke.", Limit: 1, Desc: true})
		if err == nil && len(last) == 1 {
			rows[i].LastCall = &last[0].TS
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
	dry := cmd.Bool("dry-run")
	if err := hosts.Disconnect(cmd.Root().Writer, t.cfg, t.storedPAT(), dry); err != nil || dry || !cmd.Bool("revoke") {
		return err
	}
	adm, err := hostAdmin(cmd)
	if err != nil {
		return err
	}
	resp, err := adm.RevokeHost(ctx, t.store, t.agent, "disconnected from "+t.cfg.Host.Label)
	if err != nil {
		addr, aerr := gatewayAddr(cmd)
		return notRunning(addr, errors.Join(err, aerr))
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
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return nil, err
	}
	return client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
}

func clientsConnectCommand() *cli.Command {
	return &cli.Command{
		Name:      "connect",
		Usage:     "enroll a host's agent and write the plexus entry into the host's config file",
		ArgsUsage: "<host>",
		Description: "Hosts: claude-code, claude-desktop, cursor, vscode, vscode-insiders, codex, gemini, windsurf; any other with\n" +
			"--config PATH --format mcpServers|vscode|codex-toml. The host becomes the agent <host> (or --agent),\n" +
			"its credential stored under --home in clients/<agent>/ (0600). The entry launches this binary\n" +
			"(plexus mcp serve --agent <agent>), so no secret enters the host's file; with --http it holds\n" +
			"the URL of /mcp and the agent's PAT instead. The diff is printed first, the file as it was is\n" +
			"kept beside it (<file>.plexus-backup[.N]), and nothing else in the file changes.",
		Flags: append(append(hostFlags(), viewFlags()...),
			&cli.StringFlag{Name: "agent", Usage: "the host's agent id (default: the host's name)"},
			&cli.BoolFlag{Name: "http", Usage: "reach Plexus over HTTP (/mcp with the PAT in a header) instead of launching plexus mcp serve"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the diff only: enroll nothing, write nothing"},
			&cli.StringSliceFlag{Name: "grant", Usage: "a starting standing grant, `<capability>[=verbs]`; repeatable"},
			&cli.StringFlag{Name: "window", Usage: "trust window of the starting grants: once, 1h, 1d, 7d, until-revoked or a duration"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := refuseProjectHTTP(cmd); err != nil {
				return err
			}
			t, err := resolveTarget(cmd)
			if err != nil {
				return err
			}
			// The view is checked before anything is enrolled or written.
			v, setView, err := viewFromFlags(cmd)
			if err != nil {
				return err
			}
			if err := connectHost(ctx, cmd, t, (*hosts.Config).Upsert); err != nil || !setView || cmd.Bool("dry-run") {
				return err
			}
			return setAgentView(cmd, t.agent, v)
		},
	}
}

// refuseProjectHTTP refuses --http with --scope project: an HTTP entry
// holds the agent's PAT, and a project's file (.mcp.json, .vscode/mcp.json)
// is one people commit. Checked before anything is enrolled or written.
func refuseProjectHTTP(cmd *cli.Command) error {
	if cmd.Bool("http") && cmd.String("config") == "" && hosts.Scope(cmd.String("scope")) == hosts.ScopeProject {
		return usageError(cmd, "--http writes the agent's PAT into the host's file, and a project's file is often committed: connect the project without --http (the entry launches plexus mcp serve and holds no secret), or use --scope user")
	}
	return nil
}

// connectHost reads the connect flags and has hosts.Connect plan the edit
// of t's file with plan, enroll t's agent and write the file.
func connectHost(ctx context.Context, cmd *cli.Command, t hostTarget, plan hosts.Plan) error {
	grants, err := connectGrants(cmd)
	if err != nil {
		return err
	}
	addr, err := gatewayAddr(cmd)
	if err != nil {
		return err
	}
	reach := hosts.Reach{HTTP: cmd.Bool("http"), Addr: addr, DefaultAddr: defaultAddr, Home: absHome(cmd)}
	if !reach.HTTP {
		exe, err := os.Executable()
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			return fmt.Errorf("locate this binary for the host to launch: %w", err)
		}
		reach.Binary = exe
	}
	enroll := func(ctx context.Context) (string, []plexus.Declined, error) {
		adm, err := hostAdmin(cmd)
		if err != nil {
			return "", nil, err
		}
		pat, declined, err := adm.EnrollHost(ctx, t.store, plexus.ConnectRequest{AgentID: t.agent, Label: t.cfg.Host.Label, Grants: grants})
		return pat, declined, notRunning(addr, err)
	}
	return hosts.Connect(ctx, cmd.Root().Writer, hosts.Connection{Config: t.cfg, Agent: t.agent, CredDir: t.store.Dir(),
		PAT: t.storedPAT(), Reach: reach, DryRun: cmd.Bool("dry-run"), Enroll: enroll}, plan)
}
