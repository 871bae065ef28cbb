package mcphost

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/plexus-gw/plexus"
)

// ListItem is one server of mcp.json as `plexus mcp list` shows it.
type ListItem struct {
	Server
	Problem string               `json:"problem,omitempty"`
	Source  *plexus.SourceStatus `json:"source,omitempty"`
}

// ListItems is each server of doc with its problem (a bad entry, a secret
// not set) and, when the daemon runs it, its source's status from live
// (keyed by source id, nil when no daemon answers). missing lists the
// secrets a server refers to that are not stored.
func ListItems(doc *File, live map[string]plexus.SourceStatus, missing func(Server) []string) []ListItem {
	var items []ListItem
	for _, n := range doc.Names() {
		it := ListItem{Server: Server{Name: n}}
		s, err := doc.Server(n)
		if err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				it.Problem = ce.Problem
			} else {
				it.Problem = err.Error()
			}
		} else {
			it.Server = s
			if m := missing(s); len(m) > 0 {
				it.Problem = "secret " + strings.Join(m, ", ") + " not set (plexus secrets set <name>)"
			}
		}
		if st, ok := live["mcp:"+n]; ok {
			it.Source = &st
		}
		items = append(items, it)
	}
	return items
}

// WriteList prints items for a person (plexus mcp list): a table of the
// servers and their state, then what Plexus ignores in the file and what
// it holds for the owner. running says whether a daemon answered.
func WriteList(w io.Writer, items []ListItem, running bool) error {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "NAME\tSERVER\tENTRIES\tHELD\tSTATE")
	for _, it := range items {
		entries, held, state := "-", "-", "not running"
		switch {
		case it.Problem != "":
			state = "not started: " + it.Problem
		case it.Disabled:
			state = "disabled"
		case it.Source != nil:
			entries = fmt.Sprint(it.Source.Entries)
			held = fmt.Sprint(len(it.Source.Held))
			state = string(it.Source.Health.Status)
			switch {
			case it.Source.Health.NeedsSignIn:
				state = it.Source.Health.Detail // "needs sign-in: run plexus mcp login <name>"
			case it.Source.Health.Detail != "":
				state += " (" + it.Source.Health.Detail + ")"
			}
		case running:
			state = "not listed yet"
		}
		describe := it.Describe()
		if describe == "" {
			describe = "-"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", it.Name, describe, entries, held, state)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, it := range items {
		if len(it.Ignored) > 0 {
			fmt.Fprintf(w, "%s: Plexus ignores %s (kept in the file).\n", it.Name, strings.Join(it.Ignored, ", "))
		}
		if it.Source != nil && len(it.Source.Held) > 0 {
			fmt.Fprintf(w, "%s: held until you decide (plexus pending): %s\n", it.Name, strings.Join(it.Source.Held, ", "))
		}
	}
	return nil
}

// WriteWait says what a running daemon made of the server name just added,
// last being its source's last status (a zero ID when never listed) and up
// whether it is healthy with entries.
func WriteWait(w io.Writer, name string, last plexus.SourceStatus, up bool) {
	id := "mcp:" + name
	switch {
	case up:
		fmt.Fprintf(w, "Plexus serves %d entries of %s (mcp.%s.…); their definitions are pinned.\n", last.Entries, id, name)
	case last.ID == "":
		fmt.Fprintf(w, "Plexus has not listed %s yet; see plexus mcp list and the daemon's log.\n", id)
	default:
		fmt.Fprintf(w, "%s: %d entries, health %s %s\n", id, last.Entries, last.Health.Status, last.Health.Detail)
	}
}
