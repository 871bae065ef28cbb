package daemon

import (
	"github.com/plexus-gw/plexus/console"
	"github.com/plexus-gw/plexus/scaffold"
)

// newConsole builds the owner's web console (issue 15). It reads the
// connection-key from the home for each request, so a rotated key signs
// every console out; its pages are woken by the decision folders' hints
// (forwardHints).
func (d *Daemon) newConsole(o Options) {
	dir := d.home.Dir
	d.console = console.New(console.Options{Home: dir, Owner: d.gw, Grants: d.gw, Tokens: d.db, Decider: o.Owner, Clock: o.Clock, Logger: d.log,
		Key: func() (string, error) { return scaffold.ReadConnectionKey(dir) }})
}
