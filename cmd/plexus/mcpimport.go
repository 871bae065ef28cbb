package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/plexus-gw/plexus/hosts"
	"github.com/plexus-gw/plexus/mcphost"
	"github.com/urfave/cli/v3"
)

func mcpImportCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "add the MCP servers a host configures (Claude Code, Cursor, VS Code, Codex, …) to mcp.json",
		ArgsUsage: "<host>",
		Description: "Each server of the host's file is added to mcp.json under its own name, checked by mcp.json's rules;\n" +
			"a name mcp.json already has is never overwritten. Nothing is started by the import itself: a running\n" +
			"Plexus starts the new servers as it does after plexus mcp add. With --replace-in-host the host's servers\n" +
			"are then replaced in its own file by the single plexus entry (as plexus clients connect writes it; the\n" +
			"file as it was is kept beside it), once every one of them is in mcp.json. For claude-code, the user scope's\n" +
			"import also reads the servers Claude Code keeps for this project alone (its local scope, or --project DIR's);\n" +
			"--scope local imports (and with --replace-in-host replaces) only those.",
		Flags: append(hostFlags(),
			&cli.BoolFlag{Name: "replace-in-host", Usage: "replace the host's servers by the plexus entry, enrolling the host's agent if needed"},
			&cli.StringFlag{Name: "agent", Usage: "with --replace-in-host: the host's agent id (default: the host's name)"},
			&cli.BoolFlag{Name: "http", Usage: "with --replace-in-host: the plexus entry reaches /mcp over HTTP"},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be imported and print the host file's diff; write nothing"},
		),
		Action: mcpImport,
	}
}

func mcpImport(ctx context.Context, cmd *cli.Command) error {
	if cmd.Bool("replace-in-host") {
		if err := refuseProjectHTTP(cmd); err != nil {
			return err
		}
	}
	t, err := resolveTarget(cmd)
	if err != nil {
		return err
	}
	servers, err := t.cfg.Servers()
	if err != nil {
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
	res := doc.Import(importCandidates(servers))
	w := cmd.Root().Writer
	for _, l := range res.Lines {
		fmt.Fprintln(w, l)
	}
	added, local, err := importLocal(cmd, t, doc)
	if err != nil {
		return err
	}
	if added += res.Added; added > 0 && !cmd.Bool("dry-run") {
		if err := doc.Save(); err != nil {
			return err
		}
		fmt.Fprintf(w, "Added %d servers to %s; a running Plexus starts them (plexus mcp list).\n", added, path)
	}
	if !cmd.Bool("replace-in-host") {
		return nil
	}
	if len(res.Left) > 0 {
		return &codedError{code: exitError, msg: fmt.Sprintf("%s keeps its servers: %s not in mcp.json as the host has them (see above); resolve that, then run this again",
			t.cfg.Path, strings.Join(res.Left, ", "))}
	}
	if err := connectHost(ctx, cmd, t, (*hosts.Config).ReplaceAll); err != nil || local == nil {
		return err
	}
	fmt.Fprintf(w, "The servers %s keeps for the project %s stay in %s (and win over the plexus entry by name there); to move them too: plexus mcp import %s --scope local --replace-in-host\n",
		t.cfg.Host.Label, local.Host.LocalProject(), local.Path, t.cfg.Host.Name)
	return nil
}

// importLocal imports, for a host with a local scope (Claude Code) whose
// user file is imported, the servers it keeps for the project alone: they
// are part of what the host runs there. It returns how many it added and
// the local scope's file, nil when there is no such server.
func importLocal(cmd *cli.Command, t hostTarget, doc *mcphost.File) (int, *hosts.Config, error) {
	h := t.cfg.Host
	if !h.Local || h.LocalProject() != "" || cmd.String("config") != "" || hosts.Scope(cmd.String("scope")) != hosts.ScopeUser {
		return 0, nil, nil
	}
	env, err := hostEnv(cmd.String("project"))
	if err != nil {
		return 0, nil, usageError(cmd, "--project: %v", err)
	}
	lh, path, err := h.Locate(env, hosts.ScopeLocal)
	if err != nil {
		return 0, nil, err
	}
	cfg, err := hosts.Read(lh, path)
	if err != nil {
		return 0, nil, err
	}
	servers, err := cfg.Servers()
	if err != nil {
		return 0, nil, err
	}
	cands := importCandidates(servers)
	if len(cands) == 0 {
		return 0, nil, nil
	}
	w := cmd.Root().Writer
	fmt.Fprintf(w, "%s's local servers of the project %s:\n", h.Label, lh.LocalProject())
	res := doc.Import(cands)
	for _, l := range res.Lines {
		fmt.Fprintln(w, l)
	}
	return res.Added, cfg, nil
}

// importCandidates are the host's servers as mcp.json entries, but for
// Plexus's own.
func importCandidates(servers []hosts.Server) []mcphost.Candidate {
	var out []mcphost.Candidate
	for _, s := range servers {
		if s.Name == hosts.EntryName {
			continue
		}
		c := mcphost.Candidate{Name: s.Name, Problem: s.Problem, Ignored: s.Ignored}
		if c.Problem == "" {
			var err error
			if c.Entry, err = s.MCPJSON(); err != nil {
				c.Problem = err.Error()
			}
		}
		out = append(out, c)
	}
	return out
}
