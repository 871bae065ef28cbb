package daemon

import (
	"time"

	"github.com/plexus-gw/plexus/journal"
)

// newPruner keeps journal.db bounded (journal.Pruner): ended state on every
// pass, and activity rows older than auth-config.json's
// activityRetentionDays when the owner set it. Run runs it.
func (d *Daemon) newPruner(o Options) *journal.Pruner {
	return &journal.Pruner{DB: d.db, Clock: o.Clock, Every: o.PruneEvery, Logger: d.log,
		ActivityRetention: time.Duration(d.home.Auth.ActivityRetentionDays) * 24 * time.Hour}
}
