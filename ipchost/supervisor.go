// Package ipchost runs the ipc tool providers the owner declares
// (providers.json): the hub that serves their socket and launches their
// processes, one registry source per provider, and the reload that makes
// the running providers match the file.
//
// It must never quote an env value of a provider (they may be private) in
// an error, a log or the journal, and never launch a provider from a file
// that breaks a rule.
package ipchost

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// socketName is the ipc socket's name in PLEXUS_HOME/run.
const socketName = "ipc.sock"

// Registry is what the supervisor needs of the registry: a source per
// provider, refreshed when the provider registers tools. Safe for
// concurrent use: the hub's callbacks run on its goroutines.
type Registry interface {
	Add(ctx context.Context, src plexus.Source) (registry.AddResult, error)
	Refresh(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	ReportHealth(id string, h plexus.Health)
}

// Note journals what the supervisor and the hub observed (the gateway's
// Note); it is called only once the daemon serves.
type Note func(action, target, trace string, payload map[string]any)

// Supervisor is the daemon's side of providers.json: it runs the ipc
// hub (the socket, the providers' processes, the ipc transport), keeps one
// registry source per provider, and makes the running providers match the
// file when asked (at start and on POST /admin/api/providers/reload, which
// `plexus providers add|remove|reload` call after editing the file).
//
// It implements the http package's ProvidersAPI.
type Supervisor struct {
	hub  *ipc.Hub
	reg  Registry
	path string
	log  *slog.Logger
	note Note
	// down is why ipc is not served (the socket could not be bound: a
	// PLEXUS_HOME whose path is too long for a unix socket, a live
	// socket of another daemon); nil when it is. The daemon runs on
	// without providers then.
	down error

	mu sync.Mutex // serializes load and ReloadProviders
}

// New builds the hub over the socket socketDir/ipc.sock and binds it; home
// is PLEXUS_HOME, where providers.json is. A socket that cannot be bound is
// not an error: the daemon runs on without providers, and says why.
func New(reg Registry, home, socketDir string, bins ipc.Binaries, o ipc.HubOptions, log *slog.Logger, note Note) (*Supervisor, error) {
	s := &Supervisor{reg: reg, path: Path(home), log: log, note: note}
	o.SocketPath = filepath.Join(socketDir, socketName)
	o.Logger = log
	o.Note = note
	o.OnTools = func(id string) {
		// The registration is answered after the refresh, so a provider
		// told "registered" is in the manifest already.
		if err := reg.Refresh(context.Background(), ipc.SourceID(id)); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
			log.Warn("ipc: refresh a provider's tools", "provider", id, "err", err)
		}
	}
	o.OnHealth = func(id string, h plexus.Health) { reg.ReportHealth(ipc.SourceID(id), h) }
	o.CoreVersion = plexus.Version
	o.InstanceID = rand.Text()
	hub, err := ipc.NewHub(bins, o)
	if err != nil {
		return nil, err
	}
	s.hub = hub
	if err := hub.Listen(); err != nil {
		s.down = err
		log.Warn("ipc providers are not served", "err", err)
	}
	return s, nil
}

// Hub is the ipc transport the registry dispatches to.
func (s *Supervisor) Hub() *ipc.Hub { return s.hub }

// Load declares the providers of providers.json at start. A file that
// breaks a rule is journaled and launches nothing; the daemon serves on.
func (s *Supervisor) Load(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		s.note("ipc.unavailable", "ipc", "", map[string]any{"error": s.down.Error()})
		return
	}
	doc, err := ReadFile(s.path)
	if err != nil {
		s.log.Error("providers.json", "err", err)
		s.note("provider.config_invalid", scaffold.FileProviders, "", map[string]any{"error": err.Error()})
		return
	}
	configs := doc.Configs()
	for _, id := range doc.IDs() {
		if err := s.add(ctx, id, configs[id]); err != nil {
			s.log.Error("provider not started", "provider", id, "err", err)
		}
	}
}

// add declares a provider to the hub (which launches it) and its source to
// the registry.
func (s *Supervisor) add(ctx context.Context, id string, cfg plexus.ProviderConfig) error {
	src, err := s.hub.Add(id, cfg)
	if err != nil {
		return err
	}
	if _, err := s.reg.Add(ctx, src); err != nil {
		// Just added, so the hub knows it: Remove fails only on an
		// unknown id, which would be a bug worth a line in the log.
		if rerr := s.hub.Remove(id); rerr != nil {
			s.log.Warn("ipc: stop a provider whose source was refused", "provider", id, "err", rerr)
		}
		return err
	}
	// A registration that landed between Add's scan and the source
	// becoming known found no source to refresh: look once more.
	if err := s.reg.Refresh(ctx, src.ID()); err != nil {
		s.log.Warn("ipc: refresh a provider's tools", "provider", id, "err", err)
	}
	s.note("provider.added", id, "", map[string]any{"command": cfg.Command, "restart": cfg.Restart,
		"env": slices.Sorted(maps.Keys(cfg.Env))})
	return nil
}

// remove drops a provider's entries, then stops it.
func (s *Supervisor) remove(ctx context.Context, id string) {
	if err := s.reg.Remove(ctx, ipc.SourceID(id)); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
		s.log.Warn("ipc: remove a provider's source", "provider", id, "err", err)
	}
	if err := s.hub.Remove(id); err != nil {
		s.log.Warn("ipc: stop a provider", "provider", id, "err", err)
	}
	s.note("provider.removed", id, "", nil)
}

// Run serves the hub until ctx ends (see ipc.Hub.Run).
func (s *Supervisor) Run(ctx context.Context) error {
	if s.down != nil {
		<-ctx.Done()
		return nil
	}
	return s.hub.Run(ctx)
}

// Providers lists the declared providers' live state.
func (s *Supervisor) Providers(context.Context) ([]plexus.ProviderStatus, error) {
	if s.down != nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "ipc providers are not served by this daemon: %v", s.down)
	}
	return s.hub.Status(), nil
}

// ReloadProviders makes the running providers match providers.json:
// removed ones are stopped (their entries dropped first), new ones
// launched, changed ones stopped and launched with the new declaration.
// A file that breaks a rule changes nothing.
func (s *Supervisor) ReloadProviders(ctx context.Context) (plexus.ProvidersReloadResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := plexus.ProvidersReloadResponse{Added: []string{}, Removed: []string{}, Restarted: []string{}}
	if s.down != nil {
		return resp, plexus.Errorf(plexus.CodeSourceUnavailable, "ipc providers are not served by this daemon: %v", s.down)
	}
	doc, err := ReadFile(s.path)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			return resp, plexus.Errorf(plexus.CodeInvalidRequest, "%s; nothing was changed", fe.Error())
		}
		return resp, err
	}
	configs := doc.Configs()
	for _, id := range s.hub.IDs() {
		if _, ok := configs[id]; !ok {
			s.remove(ctx, id)
			resp.Removed = append(resp.Removed, id)
		}
	}
	for _, id := range doc.IDs() {
		cfg := configs[id]
		old, ok := s.hub.Config(id)
		switch {
		case !ok:
			if err := s.add(ctx, id, cfg); err != nil {
				return resp, err
			}
			resp.Added = append(resp.Added, id)
		case !reflect.DeepEqual(old, cfg):
			s.remove(ctx, id)
			if err := s.add(ctx, id, cfg); err != nil {
				return resp, err
			}
			resp.Restarted = append(resp.Restarted, id)
		}
	}
	resp.Providers = s.hub.Status()
	return resp, nil
}
