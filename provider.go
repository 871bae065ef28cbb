package plexus

import "time"

// Restart policies of a tool provider: what happens when its process ends.
const (
	// RestartOnFailure restarts a provider that exited with a non-zero
	// status, was killed by a signal, or was stopped by Plexus for missing
	// heartbeats, losing its connection or never connecting; a clean exit
	// (status 0) stays down. The default.
	RestartOnFailure = "on-failure"
	// RestartAlways restarts a provider whenever its process ends.
	RestartAlways = "always"
	// RestartNever leaves a provider down once its process ends.
	RestartNever = "never"
)

// ProviderConfig is one tool provider the owner declared in
// PLEXUS_HOME/providers.json: a process, in any language, that Plexus
// launches and that connects back over the ipc socket (the OpenSentience
// runtime protocol) to offer tools. Env values are the owner's and are never
// shown by the admin API or the CLI (only their names).
type ProviderConfig struct {
	// Command is a bare program name, looked up on the platform's
	// enriched PATH at each start, or an absolute path. Never a shell line.
	Command string `json:"command"`
	// Args are passed as they are, never through a shell.
	Args []string `json:"args,omitempty"`
	// Env adds variables to the provider's environment; a name starting
	// with PLEXUS_ is refused (those are the gateway's).
	Env map[string]string `json:"env,omitempty"`
	// Restart is one of the Restart* policies; empty means on-failure.
	Restart string `json:"restart,omitempty"`
	// MaxFrameBytes is this provider's frame limit, announced in
	// core.welcome; 0 means the gateway's (4 MiB by default).
	MaxFrameBytes int `json:"max_frame_bytes,omitempty"`
}

// ProvidersFile is the shape of PLEXUS_HOME/providers.json.
type ProvidersFile struct {
	Providers map[string]ProviderConfig `json:"providers"`
}

// Provider states, as ProviderStatus.State reports them.
const (
	ProviderStarting   = "starting"   // launched; agent.hello not yet accepted
	ProviderConnected  = "connected"  // a session is open
	ProviderRestarting = "restarting" // waiting out a backoff before the next launch
	ProviderExited     = "exited"     // ended, and its restart policy keeps it down
	ProviderStopped    = "stopped"    // being removed, or the gateway is stopping
)

// ProviderStatus is a declared provider as the running gateway sees it (GET
// /admin/api/providers).
type ProviderStatus struct {
	ID      string   `json:"id"`
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// EnvNames are the names of the variables the config adds, never
	// their values.
	EnvNames []string `json:"envNames,omitempty"`
	Restart  string   `json:"restart"`
	// Source is the registry source holding the provider's tools.
	Source string `json:"source"`
	State  string `json:"state"`
	PID    int    `json:"pid,omitempty"`
	// Since is when the provider entered its current state.
	Since *time.Time `json:"since,omitempty"`
	// AgentVersion is what the connected process said in agent.hello.
	AgentVersion string `json:"agentVersion,omitempty"`
	// Tools are the capability entry ids of its registered tools.
	Tools    []string `json:"tools"`
	Inflight int      `json:"inflight"`
	Health   Health   `json:"health"`
	// Restarts counts the launches after the first.
	Restarts int `json:"restarts"`
	// LastExit says how the previous process ended ("exit status 2",
	// "stopped: heartbeats missed").
	LastExit string `json:"lastExit,omitempty"`
}

// ProvidersResponse is the body of GET /admin/api/providers.
type ProvidersResponse struct {
	Providers []ProviderStatus `json:"providers"`
}

// ProvidersReloadResponse is the body of POST /admin/api/providers/reload:
// what the running gateway changed to match providers.json, and where every
// provider stands afterwards.
type ProvidersReloadResponse struct {
	Added     []string         `json:"added"`
	Removed   []string         `json:"removed"`
	Restarted []string         `json:"restarted"`
	Providers []ProviderStatus `json:"providers"`
}
