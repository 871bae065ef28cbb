package daemon

import (
	"context"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/plexus-gw/plexus/telemetry"
	"github.com/plexus-gw/plexus/watcher"
)

// newFront builds the MCP front door at /mcp (issue 14) with the owner's
// per-agent views (mcp-views.json) and the watch that applies their edits.
// A views file that does not read at start is logged and shows every
// agent the default view until it is fixed.
func (d *Daemon) newFront(o Options) error {
	path := filepath.Join(d.home.Dir, mcpserver.ViewFileName)
	views, err := mcpserver.LoadViewFile(path)
	if err != nil {
		d.log.Error("MCP views not applied; every agent sees the default view until the file is fixed", "err", err)
	}
	d.views = views
	d.viewWatch, err = watcher.New([]string{d.home.Dir}, watcher.Options{Logger: d.log,
		Only: func(name string) bool { return name == mcpserver.ViewFileName }})
	if err != nil {
		return err
	}
	d.front = mcpserver.New(mcpserver.Backend{Sessions: d.gw, Grants: d.gw, Invoke: d.observeInvoke(d.gw, telemetry.ViaMCP), Agents: d.gw, Changes: d.gw, Upstream: d.gw},
		mcpserver.Options{Inbox: d.home.Inbox, Active: d.home.Active, PeerUID: plexushttp.PeerUID, Logger: d.log, Clock: o.Clock,
			Views: d.views, Middleware: []mcp.Middleware{telemetry.MCPServerSpans(d.obs.tracer, telemetry.MCPOverHTTP)}})
	return nil
}

// followViews applies each edit of mcp-views.json (plexus agents view, or
// the owner's editor) and tells the connected hosts, until the watch ends.
// An edit that does not read is logged, and the views read before stay.
func (d *Daemon) followViews(context.Context) error {
	for range d.viewWatch.Hints() {
		if err := d.views.Reload(); err != nil {
			d.log.Error("MCP views not applied; the views read before stay", "err", err)
			continue
		}
		d.front.ViewsChanged()
	}
	return nil
}
