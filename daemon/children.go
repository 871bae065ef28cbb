package daemon

import (
	"context"
	"strconv"
)

// reapChildren stops the process groups a previous run of the daemon left
// running when it was killed before it could stop them (platform.Services
// .ReapChildren), and journals each as a system row, child.reaped. A
// failure to reap is logged: the daemon serves on, as it would have
// without the record.
func (d *Daemon) reapChildren(ctx context.Context) {
	reaped, err := d.plat.ReapChildren(ctx)
	if err != nil {
		d.log.Warn("stop what the previous run left running", "err", err)
	}
	for _, r := range reaped {
		payload := map[string]any{"pid": r.PID, "pgid": r.PGID, "members": r.Members, "killed": r.Killed}
		d.gw.Note(ctx, "child.reaped", "pgid:"+strconv.Itoa(r.PGID), "", payload)
		d.log.Info("stopped a process group a previous run left running", "pgid", r.PGID, "members", len(r.Members), "killed", r.Killed)
	}
}
