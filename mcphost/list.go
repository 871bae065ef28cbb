package mcphost

import (
	"errors"
	"strings"

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
