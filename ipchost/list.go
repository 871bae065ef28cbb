package ipchost

import (
	"maps"
	"slices"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// Row is one provider as `plexus providers list` shows it.
type Row struct {
	plexus.ProviderStatus
	Running bool `json:"running"`
}

// Rows is each provider of configs (the file), then each one live (what a
// running daemon reports) that is gone from the file, not reloaded yet,
// with the daemon's status where it runs the provider. running says
// whether a daemon answered: a provider in the file it does not run is
// "not loaded" then, "not running" otherwise.
func Rows(configs map[string]plexus.ProviderConfig, live map[string]plexus.ProviderStatus, running bool) []Row {
	ids := slices.Sorted(maps.Keys(configs))
	for id := range live {
		if _, ok := configs[id]; !ok {
			ids = append(ids, id) // running, but gone from the file (not reloaded yet)
		}
	}
	rows := make([]Row, 0, len(ids))
	for _, id := range ids {
		st, ok := live[id]
		if !ok {
			cfg := configs[id]
			st = plexus.ProviderStatus{ID: id, Command: cfg.Command, Args: cfg.Args, EnvNames: slices.Sorted(maps.Keys(cfg.Env)),
				Restart: cfg.Restart, Source: ipc.SourceID(id), State: "not running", Tools: []string{}}
			if running {
				st.State = "not loaded" // in the file, not applied: plexus providers reload
			}
		}
		rows = append(rows, Row{ProviderStatus: st, Running: ok})
	}
	return rows
}
