package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
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
			"file as it was is kept beside it), once every one of them is in mcp.json.",
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
	t, err := resolveTarget(cmd)
	if err != nil {
		return err
	}
	cfg, err := hosts.Read(t.host, t.path)
	if err != nil {
		return err
	}
	servers, err := cfg.Servers()
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
	res := planImport(doc, path, servers)
	w := cmd.Root().Writer
	for _, l := range res.lines {
		fmt.Fprintln(w, l)
	}
	if res.added > 0 && !cmd.Bool("dry-run") {
		if err := doc.Save(); err != nil {
			return err
		}
		fmt.Fprintf(w, "Added %d servers to %s; a running Plexus starts them (plexus mcp list).\n", res.added, path)
	}
	if !cmd.Bool("replace-in-host") {
		return nil
	}
	if len(res.left) > 0 {
		return &codedError{code: exitError, msg: fmt.Sprintf("%s keeps its servers: %s not in mcp.json as the host has them (see above); resolve that, then run this again",
			t.path, strings.Join(res.left, ", "))}
	}
	return connectHost(ctx, cmd, t, cfg, (*hosts.Config).ReplaceAll)
}

// importResult is what planImport did to mcp.json.
type importResult struct {
	lines []string // what to tell the owner, one server a line
	added int
	// left names the host's servers that are not in mcp.json as the host
	// has them: the host must keep them.
	left []string
}

// planImport puts each of the host's servers into doc, by mcp.json's own
// rules: never over a server of the same name, never one that breaks a
// rule. Names are printed quoted: they come from a file Plexus did not
// write.
func planImport(doc *mcphost.File, path string, servers []hosts.Server) importResult {
	var res importResult
	plain := false
	for _, s := range servers {
		if s.Name == hosts.EntryName {
			continue // Plexus's own entry
		}
		skip := func(format string, a ...any) {
			res.lines = append(res.lines, fmt.Sprintf("%q: not imported: ", s.Name)+fmt.Sprintf(format, a...))
			res.left = append(res.left, fmt.Sprintf("%q", s.Name))
		}
		if s.Problem != "" {
			skip("%s", s.Problem)
			continue
		}
		raw, err := s.MCPJSON()
		if err != nil {
			skip("%v", err)
			continue
		}
		if have, ok := doc.Entry(s.Name); ok {
			if sameJSON(have, raw) {
				res.lines = append(res.lines, fmt.Sprintf("%q: already in mcp.json", s.Name))
			} else {
				skip("mcp.json already has a server of that name (left as it is)")
			}
			continue
		}
		if _, err := mcphost.ParseServer(path, s.Name, raw); err != nil {
			skip("%v", err)
			continue
		}
		doc.Put(s.Name, raw)
		res.added++
		line := fmt.Sprintf("%q: imported", s.Name)
		if len(s.Ignored) > 0 {
			line += fmt.Sprintf(" (not carried over: %s)", strings.Join(s.Ignored, ", "))
		}
		res.lines = append(res.lines, line)
		plain = plain || len(s.Entry.Env)+len(s.Entry.Headers) > 0
	}
	if plain {
		res.lines = append(res.lines, "env and header values were copied as written (mcp.json is 0600). To keep one as a secret: "+
			"plexus secrets set NAME, then write ${secret:NAME} in its place.")
	}
	return res
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
