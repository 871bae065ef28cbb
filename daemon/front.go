package daemon

import (
	"context"
	"path/filepath"

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
	d.viewWatch, err = watcher.New([]string{d.home.Dir}, watcher.Options{Logger: d.log, Settled: true,
		Only: func(name string) bool { return name == mcpserver.ViewFileName }})
	if err != nil {
		return err
	}
	d.front = mcpserver.New(mcpserver.Backend{Sessions: d.gw, Grants: d.gw, Invoke: d.observeInvoke(d.gw, telemetry.ViaMCP), Agents: d.gw, Changes: d.gw, Upstream: d.gw},
		mcpserver.Options{Inbox: d.home.Inbox, Active: d.home.Active, PeerUID: plexushttp.PeerUID, Logger: d.log, Clock: o.Clock,
			Views: d.views, Middleware: d.obs.mcpMiddleware()})
	return nil
}

// followViews applies each edit of mcp-views.json (plexus agents view, or
// the owner's editor) and tells the connected hosts, until the watch ends.
// An edit that does not read is logged, and the views read before stay.
// Each agent whose view changed gets a view.changed row.
func (d *Daemon) followViews(ctx context.Context) error {
	for range d.viewWatch.Hints() {
		changed, err := d.views.Reload()
		if err != nil {
			d.log.Error("MCP views not applied; the views read before stay", "err", err)
			continue
		}
		for _, agent := range changed {
			d.gw.OnViewChanged(ctx, agent, viewFields(d.views.View(agent)))
		}
		d.front.ViewsChanged()
	}
	return nil
}

// viewFields is v as the views file holds it, for a journal row.
func viewFields(v mcpserver.View) map[string]any {
	out := map[string]any{}
	if len(v.Only) > 0 {
		out["only"] = v.Only
	}
	if v.Names != "" {
		out["names"] = v.Names
	}
	if v.Mode != "" {
		out["mode"] = v.Mode
	}
	if v.SearchAbove != 0 {
		out["searchAbove"] = v.SearchAbove
	}
	return out
}
