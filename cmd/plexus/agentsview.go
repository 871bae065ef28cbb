package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/urfave/cli/v3"
)

func agentsViewCommand() *cli.Command {
	return &cli.Command{
		Name:  "view",
		Usage: "set (or, with no setting, show) what an agent's MCP host is shown",
		Description: "The view is the owner's file mcp-views.json under --home; a running daemon applies a change at once\n" +
			"and tells the agent's connected hosts (list_changed). A view only hides: what runs is still the grants'.\n" +
			"--names original shows one MCP server's tools, resources and prompts under their upstream names, so\n" +
			"every --only must be under mcp.<server>. of that one server.",
		ArgsUsage: "<agent-id>",
		Flags: append(viewFlags(),
			&cli.BoolFlag{Name: "clear", Usage: "remove the agent's view: it sees the default view again"},
			&cli.BoolFlag{Name: "json", Usage: "print the view as JSON"}),
		Action: agentsView,
	}
}

// viewFlags are the flags that set a view, on agents view and (wired by
// the lead) clients connect; read them with viewFromFlags.
func viewFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "only", Usage: "show only this capability id or pattern ('*' matches any run: mcp.github.*); repeatable"},
		&cli.StringFlag{Name: "names", Usage: "tool names: safe (derived from the id, the default) or original (one MCP server's own names)"},
		&cli.StringFlag{Name: "mode", Usage: "tools, search (a search tool and a call-by-id tool) or auto (search above --search-above tools; the default)"},
		&cli.IntFlag{Name: "search-above", Usage: "with --mode auto, show the search tools above this many tools (default 50)"},
	}
}

// viewFromFlags is the view the command's flags set; set is false when
// none was given.
func viewFromFlags(cmd *cli.Command) (v mcpserver.View, set bool, err error) {
	v = mcpserver.View{Only: cmd.StringSlice("only"), Names: cmd.String("names"), Mode: cmd.String("mode"), SearchAbove: int(cmd.Int("search-above"))}
	set = cmd.IsSet("only") || cmd.IsSet("names") || cmd.IsSet("mode") || cmd.IsSet("search-above")
	if err := v.Validate(); err != nil {
		return v, set, usageError(cmd, "%s", strings.TrimPrefix(err.Error(), mcpserver.ErrView.Error()+": "))
	}
	return v, set, nil
}

func agentsView(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() != 1 {
		return usageError(cmd, "want one <agent-id>")
	}
	agent := cmd.Args().First()
	home := cmd.String("home")
	if home == "" {
		return usageError(cmd, "--home is empty")
	}
	path := filepath.Join(home, mcpserver.ViewFileName)
	v, set, err := viewFromFlags(cmd)
	if err != nil {
		return err
	}
	switch {
	case set && cmd.Bool("clear"):
		return usageError(cmd, "--clear takes no other setting")
	case cmd.Bool("clear"):
		v = mcpserver.View{}
		fallthrough
	case set:
		if err := knownAgent(ctx, cmd.String("home"), agent); err != nil {
			return err
		}
		return setAgentView(cmd, agent, v)
	default:
		if v, err = mcpserver.ReadView(path, agent); err != nil {
			return err
		}
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return printJSON(w, v)
	}
	return writeView(w, agent, v)
}

// knownAgent refuses a view for an agent the journal has never enrolled: a
// misspelt id would otherwise sit in mcp-views.json shaping no one's
// catalog while the agent meant sees everything. (Clearing needs no check:
// it also removes a view left behind.)
func knownAgent(ctx context.Context, home, agent string) error {
	db, err := openJournalReadOnly(ctx, home)
	if err != nil {
		return err
	}
	defer db.Close()
	err = db.View(ctx, func(tx plexus.StateTx) error {
		_, err := tx.Agent(agent)
		return err
	})
	if errors.Is(err, plexus.ErrNotFound) {
		return fmt.Errorf("no agent %q is enrolled in %s (plexus agents list names them): the view is not set", agent, home)
	}
	return err
}

// setAgentView writes v as agent's view into --home's views file and says
// what the agent's hosts are now shown.
func setAgentView(cmd *cli.Command, agent string, v mcpserver.View) error {
	if err := mcpserver.SetView(filepath.Join(cmd.String("home"), mcpserver.ViewFileName), agent, v); err != nil {
		if errors.Is(err, mcpserver.ErrView) {
			return usageError(cmd, "%v", err)
		}
		return err
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		return printJSON(w, v)
	}
	return writeView(w, agent, v)
}

// writeView says in words what agent's hosts are shown.
func writeView(w io.Writer, agent string, v mcpserver.View) error {
	only := "every capability"
	if len(v.Only) > 0 {
		only = strings.Join(v.Only, ", ")
	}
	names := "safe (derived from each capability id)"
	if v.Names == mcpserver.NamesOriginal {
		names = "original (the MCP server's own)"
	}
	mode := fmt.Sprintf("auto (the search tools above %d tools)", orDefault(v.SearchAbove, mcpserver.DefaultSearchAbove))
	switch v.Mode {
	case mcpserver.ModeTools:
		mode = "tools"
	case mcpserver.ModeSearch:
		mode = "search (" + mcpserver.SearchToolName + " and " + mcpserver.CallToolName + ")"
	}
	_, err := fmt.Fprintf(w, "MCP view of agent %q:\n  shows: %s\n  names: %s\n  mode:  %s\n", agent, only, names, mode)
	return err
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
