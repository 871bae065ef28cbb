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
			clientsRestoreCommand(),
		},
	}
}

// hostFlags select a host's file: the host's own (by --scope) or any file
// (--config, --format).
func hostFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "scope", Value: string(hosts.ScopeUser), Usage: "the host's `user` file; its `project` file in the project (.mcp.json, .vscode/mcp.json, .cursor/mcp.json, …); or, for claude-code, `local`: the project's own servers in ~/.claude.json"},
		&cli.StringFlag{Name: "project", Usage: "the project `DIR` of --scope project or local (default: this folder)"},
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

// hostEnv is what locating a host's file reads from the environment;
// the project is project ("" for this folder).
func hostEnv(project string) (hosts.Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return hosts.Env{}, fmt.Errorf("locate the host's file: %w", err)
	}
	dir, err := projectDir(project)
	if err != nil {
		return hosts.Env{}, err
	}
	return hosts.Env{GOOS: runtime.GOOS, Home: home, AppData: os.Getenv("APPDATA"), XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		CodexHome: os.Getenv("CODEX_HOME"), ProjectDir: dir}, nil
}

// projectDir is the project folder, absolute and with its links resolved:
// Claude Code keys a project's local servers by the folder it runs in as
// the system reports it (getcwd), which names no link, whatever $PWD says.
func projectDir(project string) (string, error) {
	dir := project
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("locate the project: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("locate the project: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("the project folder: %w", err)
	}
	return resolved, nil
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
	env, err := hostEnv(cmd.String("project"))
	if err != nil {
		return h, "", usageError(cmd, "--project: %v", err)
	}
	h, path, err := h.Locate(env, hosts.Scope(cmd.String("scope")))
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
			env, err := hostEnv("")
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

func clientsRestoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "put a host's file back as a backup Plexus kept of it says (the newest, or --backup)",
		ArgsUsage: "<host>",
		Description: "clients connect, clients disconnect and mcp import --replace-in-host keep the host's file as it was beside it\n" +
			"(<file>.plexus-backup[.N]). restore lists them (--list, newest first) or prints the diff and writes the newest\n" +
			"(or --backup PATH) back, keeping the file as it is now as a new backup first: a restore can itself be undone.\n" +
			"Only a backup Plexus wrote for that file is restored: beside it, under its name, a regular file of its format.",
		Flags: append(hostFlags(),
			&cli.BoolFlag{Name: "list", Usage: "list the backups of the host's file, newest first; restore nothing"},
			&cli.StringFlag{Name: "backup", Usage: "restore this backup `PATH` instead of the newest"},
			&cli.BoolFlag{Name: "json", Usage: "with --list: print JSON"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the diff only"},
		),
		Action: clientsRestore,
	}
}

func clientsRestore(_ context.Context, cmd *cli.Command) error {
	if err := checkArgs(cmd, 1, "<host>"); err != nil {
		return err
	}
	h, path, err := locateHost(cmd, cmd.Args().First())
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if cmd.Bool("list") {
		list, err := hosts.Backups(path)
		if err != nil {
			return err
		}
		if cmd.Bool("json") {
			if list == nil {
				list = []hosts.BackupFile{}
			}
			return printJSON(w, list)
		}
		return hosts.WriteBackups(w, path, list)
	}
	cfg, err := hosts.Read(h, path)
	if err != nil {
		return err
	}
	err = hosts.RestoreFile(w, cfg, cmd.String("backup"), cmd.Bool("dry-run"))
	var be *hosts.BackupError
	if errors.As(err, &be) {
		return usageError(cmd, "%v", err)
	}
	return err
}
