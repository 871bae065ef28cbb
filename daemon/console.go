package daemon

import (
	"context"
	"net/http"
	"os"
	"runtime"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/console"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// newConsole builds the owner's web console (issue 15). It reads the
// connection-key from the home for each request, so a rotated key signs
// every console out; its pages are woken by the decision folders' hints
// (forwardHints).
func (d *Daemon) newConsole(o Options) {
	dir := d.home.Dir
	d.console = console.New(console.Options{Home: dir, Owner: d.gw, Grants: d.gw, Agents: d.gw, Status: d.gw, Tokens: d.db, Decider: o.Owner, Clock: o.Clock, Logger: d.log,
		Key:      func() (string, error) { return scaffold.ReadConnectionKey(dir) },
		Activity: d.activity, Changes: d.gw.Changes, Providers: d.providers,
		Journal: d.db, JournalFailed: d.gw.JournalFailed, PeerUID: consolePeerUID(), OwnerUID: os.Getuid()})
}

// consolePeerUID is the console's OS-user check, kept as a layer under its
// page secret where the platform can tell a connection's user (Linux, by
// /proc): there a request whose user cannot be told is refused. Elsewhere
// there is no such layer, rather than one that refuses every request.
func consolePeerUID() func(r *http.Request) (int, bool) {
	if runtime.GOOS != "linux" {
		return nil
	}
	return func(r *http.Request) (int, bool) { return plexushttp.PeerUID(r)() }
}

// activity reads the journal for the console's Journal page.
func (d *Daemon) activity(ctx context.Context, q console.ActivityQuery) ([]plexus.Activity, error) {
	return d.db.Newest(ctx, journal.Filter{TraceID: q.TraceID, AgentID: q.AgentID, Type: q.Type, Since: q.Since}, q.Limit)
}
