package daemon

import (
	"context"
	"fmt"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/watcher"
)

// limits are the owner's limits of auth-config.json, with Options.RateLimit
// (a test's) in place of the default rate when it is set.
func (d *Daemon) limits(a scaffold.AuthConfig) plexus.Limits {
	l := a.Limits()
	if d.rateLimit != 0 {
		l.Rate = plexus.RateLimit{CallsPerSecond: d.rateLimit}
	}
	return l
}

// watchLimits applies the limits of the home as loaded and starts the watch
// of auth-config.json that applies the owner's edits.
func (d *Daemon) watchLimits() error {
	if err := d.gw.SetLimits(d.limits(d.home.Auth)); err != nil {
		return fmt.Errorf("%s: %w", scaffold.FileAuthConfig, err)
	}
	var err error
	d.limitWatch, err = watcher.New([]string{d.home.Dir}, watcher.Options{Logger: d.log, Settled: true,
		Only: func(name string) bool { return name == scaffold.FileAuthConfig }})
	return err
}

// followLimits applies each edit of auth-config.json's limits, until the
// watch ends. An edit that does not read or holds a bad value is logged and
// shown by `plexus status`, and the limits read before stay. The file's
// other settings (token lifetime, streams, notify) apply at the next start.
func (d *Daemon) followLimits(context.Context) error {
	for range d.limitWatch.Hints() {
		a, err := scaffold.ReadAuthConfig(d.home.Dir)
		if err != nil {
			d.gw.LimitsNotApplied(err)
			d.log.Error("limits of auth-config.json not applied; the limits read before stay", "err", err)
			continue
		}
		if err := d.gw.SetLimits(d.limits(a)); err != nil {
			d.log.Error("limits of auth-config.json not applied; the limits read before stay", "err", err)
			continue
		}
		d.log.Info("limits of auth-config.json applied")
	}
	return nil
}
