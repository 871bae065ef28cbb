package ipchost

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

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

// WriteRows prints rows for a person (plexus providers list): state,
// health while it runs, tools, restarts and the command line.
func WriteRows(w io.Writer, rows []Row) error {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "ID\tSTATE\tHEALTH\tTOOLS\tRESTARTS\tCOMMAND")
	for _, r := range rows {
		health := "-"
		if r.Running {
			health = string(r.Health.Status)
			if r.Health.Detail != "" {
				health += " (" + r.Health.Detail + ")"
			}
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.State, health, len(r.Tools), r.Restarts,
			strings.Join(append([]string{r.Command}, r.Args...), " "))
	}
	return t.Flush()
}

// WriteReload says what a daemon did to apply providers.json: the
// providers it started, restarted and stopped, or that nothing changed.
func WriteReload(w io.Writer, resp plexus.ProvidersReloadResponse) {
	for _, x := range []struct {
		what string
		ids  []string
	}{{"started", resp.Added}, {"restarted", resp.Restarted}, {"stopped", resp.Removed}} {
		if len(x.ids) > 0 {
			fmt.Fprintf(w, "Plexus %s: %s\n", x.what, strings.Join(x.ids, ", "))
		}
	}
	if len(resp.Added)+len(resp.Restarted)+len(resp.Removed) == 0 {
		fmt.Fprintln(w, "Plexus already runs what providers.json declares.")
	}
}

// DownError is a provider that exited instead of connecting.
type DownError struct{ ID, LastExit string }

func (e *DownError) Error() string {
	return fmt.Sprintf("provider %s is down: %s (see the daemon's log)", e.ID, e.LastExit)
}

// WriteWait says what a running daemon made of provider id, st being its
// last status and up whether it connected and registered tools: its tools,
// or its state while it does not come up. A provider that exited is a
// *[DownError].
func WriteWait(w io.Writer, id string, st plexus.ProviderStatus, up bool) error {
	switch {
	case up:
		fmt.Fprintf(w, "Provider %s connected (pid %d, %s): %d tool(s):\n", id, st.PID, dash(st.AgentVersion), len(st.Tools))
		for _, t := range st.Tools {
			fmt.Fprintf(w, "  %s\n", t)
		}
	case st.State == plexus.ProviderExited:
		return &DownError{ID: id, LastExit: st.LastExit}
	default:
		fmt.Fprintf(w, "Provider %s is %s (%s); see: plexus providers list\n", id, dash(st.State), dash(st.Health.Detail))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
