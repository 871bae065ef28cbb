// Package gateway holds the operations of Plexus: sessions, grants, the one
// decision function, token refresh and revocation, the invoke pipeline and the
// event bus. Every channel (HTTP, files, CLI) calls into it.
//
// It never touches SQLite, files or sockets itself: state goes through
// [plexus.Store], entries and transports through the registry, and credentials
// through package auth. It never branches on a source id, a transport kind or
// an entry kind.
package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/registry"
)

// Defaults for Config fields left zero.
const (
	DefaultSessionTTL    = 12 * time.Hour
	DefaultPendingTTL    = 24 * time.Hour
	DefaultEnrollCodeTTL = 15 * time.Minute
	DefaultRefreshGrace  = time.Hour
	maxGrantsPerRequest  = 100
	sweepInterval        = 15 * time.Second
)

// Meta keys the gateway keeps in the store.
const (
	metaKeyEpoch = "connection_key_epoch"
	metaRevision = "registry_revision"
)

// EventLog replays persisted events for Last-Event-ID.
type EventLog interface {
	EventsSince(ctx context.Context, afterID int64, agentID, sessionID string, limit int) ([]plexus.Event, error)
}

// SourceFactory builds a live source from an owner's persisted configuration.
// cmd/plexus wires one per source kind, so the gateway never knows the kinds.
type SourceFactory func(cfg plexus.SourceConfig) (plexus.Source, error)

// Config holds settings; zero values take the defaults above.
type Config struct {
	BaseURL       string
	Instance      string
	Home          string
	SessionTTL    time.Duration
	PendingTTL    time.Duration
	EnrollCodeTTL time.Duration
	RefreshGrace  time.Duration
	// SameUser says how to treat agents running as the owner's own OS
	// user, who can read PLEXUS_HOME and so step around the gateway.
	SameUser SameUserPolicy
	// DenialWindow is how long repeated denials of one kind (an agent's
	// rate-limited calls, failed credentials of one kind) coalesce into one
	// journal row with a count; zero means DefaultDenialWindow.
	DenialWindow time.Duration
	// Streams caps the /events streams open at once; zero fields take
	// the defaults.
	Streams StreamLimits
}

// SameUserPolicy configures same-user agent detection.
type SameUserPolicy struct {
	// Detect turns detection on; OwnerUID is then the gateway's own uid.
	Detect   bool
	OwnerUID int
	// Refuse refuses such agents at the handshake (strict mode);
	// otherwise they are admitted, and the journal and log say so.
	Refuse bool
}

// Deps are the gateway's collaborators. All are required except Logger,
// Clock, Throttle, Limiter, SaveConnectionKey, OnDecision, PruneJournal and
// Binaries.
type Deps struct {
	Store      plexus.Store
	Events     EventLog
	Registry   *registry.Registry
	Signer     *auth.Signer
	Hasher     *auth.Hasher
	Trust      auth.Policy
	Authorizer plexus.Authorizer
	Throttle   *auth.Throttle
	Limiter    *auth.RateLimiter
	Sources    SourceFactory
	// ConnectionKey is the current admin credential.
	ConnectionKey string
	// SaveConnectionKey persists a rotated key; it runs inside the rotation
	// transaction, so a failure leaves the old key in force.
	SaveConnectionKey func(key string) error
	Clock             func() time.Time
	Logger            *slog.Logger
	// OnDecision, when set, is told the id of each decision that was put up,
	// decided, or whose grants ended (revoked, used, expired), after the
	// change committed. It must not block: files as API uses it as a hint
	// to look at that decision's file again.
	OnDecision func(pendingID string)
	// PruneJournal prunes the activity journal for the owner; nil answers
	// not_found.
	PruneJournal JournalPruner
	// Binaries finds where an extension's program is installed, as its
	// transport would run it, so that a decision shows the path that runs.
	// Nil: decisions say the path could not be looked up.
	Binaries registry.Resolver
	// SignIn starts the sign-in of a remote MCP server the owner approved
	// in the inbox. Nil: an approved sign-in request records that it could
	// not start, naming `plexus mcp login`.
	SignIn SignInStarter
}

// Gateway decides every request the edges hand it. Its methods are grouped
// by concept in files of their own (session.go, grantrequest.go, decide.go,
// invoke.go, events.go …); each edge declares the subset it calls.
type Gateway struct {
	cfg   Config
	d     Deps
	log   *slog.Logger
	now   func() time.Time
	bus   *bus
	idem  *idempotency
	val   *validator
	cache *authCache
	// denials coalesces the rows of repeated denials; Run flushes it.
	denials *denials
	jfail   journalFailures
	limits  limitsState
	// member is invokeMember as a func value, made once: a method value
	// handed to every dispatch would be allocated per call.
	member func(context.Context, plexus.InvokeRequest, plexus.InvokeContext) plexus.InvokeResponse
	// scratch recycles the buffers call inputs are encoded into for their
	// hash (*[]byte).
	scratch sync.Pool

	started time.Time

	mu      sync.RWMutex // guards keyHash, resolved and sameUserSeen
	keyHash []byte
	// sameUserSeen holds the agents that handshook from the owner's own OS
	// user since start, for `plexus status`.
	sameUserSeen map[string]bool
	// resolved holds tokens minted on approval, until their session fetches
	// them by GET /grants/status or they expire. They are never persisted.
	resolved map[string]*plexus.ScopedToken
	// pinMu serializes pin checks, so that two scans of one source never
	// put up the same changed definition twice.
	pinMu sync.Mutex
}

// New returns a gateway. It does not start anything; call Run.
func New(cfg Config, d Deps) (*Gateway, error) {
	switch {
	case d.Store == nil, d.Events == nil, d.Registry == nil, d.Signer == nil, d.Hasher == nil,
		d.Authorizer == nil, d.Sources == nil:
		return nil, errors.New("gateway: missing dependency")
	case len(d.ConnectionKey) < len(plexus.PrefixConnectionKey)+16:
		return nil, errors.New("gateway: connection-key too short")
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.PendingTTL == 0 {
		cfg.PendingTTL = DefaultPendingTTL
	}
	if cfg.EnrollCodeTTL == 0 {
		cfg.EnrollCodeTTL = DefaultEnrollCodeTTL
	}
	if cfg.RefreshGrace == 0 {
		cfg.RefreshGrace = DefaultRefreshGrace
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{
		cfg: cfg, d: d, log: d.Logger, now: func() time.Time { return d.Clock().UTC() },
		bus: newBus(cfg.Streams), denials: newDenials(cfg.DenialWindow), idem: newIdempotency(), val: newValidator(), cache: newAuthCache(),
		keyHash: d.Hasher.Hash(d.ConnectionKey), resolved: make(map[string]*plexus.ScopedToken), sameUserSeen: make(map[string]bool),
	}
	g.member = g.invokeMember
	g.started = g.now()
	return g, nil
}

// Run sweeps expired pending decisions and writes the summaries of ended
// denial windows until ctx ends, then writes every open window's summary:
// the journal must still be open when ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		if err := g.Sweep(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("sweep", "err", err)
		}
		g.flushDenials(ctx, false)
		select {
		case <-ctx.Done():
			g.flushDenials(context.WithoutCancel(ctx), true)
			return nil
		case <-t.C:
		}
	}
}

// LoadSources brings every persisted owner-configured source online. A
// source that fails to build is logged and journaled, not fatal: the owner
// can fix or remove it.
func (g *Gateway) LoadSources(ctx context.Context) error {
	var cfgs []plexus.SourceConfig
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		cfgs, err = tx.Sources()
		if err != nil {
			return err
		}
		rev, err := tx.Meta(metaRevision)
		if err == nil {
			if n, perr := strconv.ParseInt(rev, 10, 64); perr == nil {
				g.d.Registry.SetRevision(n)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("load sources: %w", err)
	}
	for _, cfg := range cfgs {
		if err := g.bringOnline(ctx, cfg); err != nil {
			g.log.Warn("source not loaded", "source", cfg.ID, "err", err)
			g.recordAnyway(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "source.failed",
				Target: cfg.ID, Payload: map[string]any{"error": err.Error()}})
		}
	}
	return nil
}

func (g *Gateway) bringOnline(ctx context.Context, cfg plexus.SourceConfig) error {
	src, err := g.d.Sources(cfg)
	if err != nil {
		return err
	}
	return g.bringOnlineSource(ctx, src)
}

// bringOnlineSource adds a built source to the registry and journals the
// ids it lost to another source.
func (g *Gateway) bringOnlineSource(ctx context.Context, src plexus.Source) error {
	res, err := g.d.Registry.Add(ctx, src)
	if err != nil {
		return err
	}
	for _, c := range res.Skipped {
		g.recordAnyway(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "source.collision",
			Target: src.ID(), Payload: map[string]any{"capabilityId": c.ID, "reason": c.Reason}})
	}
	return nil
}

// OnRegistryChange is wired as the registry's OnChange: it persists the
// revision and tells every session to re-fetch the manifest.
func (g *Gateway) OnRegistryChange(rev int64, added, removed, updated []string) {
	data := plexus.ManifestChangedEvent{Type: plexus.EventManifestChanged, Revision: rev}
	if len(added)+len(removed)+len(updated) > 0 {
		data.Changed = &struct {
			Added   []string `json:"added,omitempty"`
			Removed []string `json:"removed,omitempty"`
			Updated []string `json:"updated,omitempty"`
		}{added, removed, updated}
	}
	ev := newEvent(plexus.EventManifestChanged, "", "", data, nil)
	err := g.update(context.Background(), false, func(tx plexus.StateTx) error {
		if err := tx.SetMeta(metaRevision, strconv.FormatInt(rev, 10)); err != nil {
			return err
		}
		if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "manifest.changed",
			Target: strconv.FormatInt(rev, 10), Payload: map[string]any{"added": added, "removed": removed, "updated": updated}}); err != nil {
			return err
		}
		return tx.Publish(ev)
	})
	if err != nil {
		g.JournalFailed("manifest.changed "+strconv.FormatInt(rev, 10), err)
		return
	}
	g.bus.publish(*ev)
}

// OnSourceStatus is wired as the registry's OnSourceStatus.
func (g *Gateway) OnSourceStatus(source string, h plexus.Health) {
	data := plexus.SourceStatusEvent{Type: plexus.EventSourceStatus, Source: source,
		Available: h.Status == plexus.HealthOK || h.Status == plexus.HealthDegraded, Reason: h.Detail}
	ev := newEvent(plexus.EventSourceStatus, "", "", data, nil)
	err := g.update(context.Background(), false, func(tx plexus.StateTx) error {
		if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "source.status",
			Target: source, Payload: map[string]any{"status": string(h.Status), "detail": h.Detail}}); err != nil {
			return err
		}
		return tx.Publish(ev)
	})
	if err != nil {
		g.JournalFailed("source.status "+source, err)
		return
	}
	g.bus.publish(*ev)
}

// touch hints OnDecision about each non-empty decision id.
func (g *Gateway) touch(ids ...string) {
	if g.d.OnDecision == nil {
		return
	}
	for _, id := range ids {
		if id != "" {
			g.d.OnDecision(id)
		}
	}
}

// appender is the journal's cheaper way to commit one activity row on its
// own (journal.DB.Append): the same guarantees as a non-durable Update that
// only records it. Safe for concurrent use.
type appender interface {
	Append(ctx context.Context, a *plexus.Activity) error
}

// record writes one activity row in its own transaction.
func (g *Gateway) record(ctx context.Context, durable bool, a *plexus.Activity) error {
	// An activity row changes no record the auth cache holds: no update().
	if ap, ok := g.d.Store.(appender); ok && !durable {
		return ap.Append(ctx, a)
	}
	return g.d.Store.Update(ctx, durable, func(tx plexus.StateTx) error { return tx.Record(a) })
}

// checkKey compares a presented connection-key with the current one in
// constant time.
func (g *Gateway) checkKey(key string) bool {
	if key == "" {
		return false
	}
	g.mu.RLock()
	want := g.keyHash
	g.mu.RUnlock()
	return subtle.ConstantTimeCompare(g.d.Hasher.Hash(key), want) == 1
}

// throttled refuses a credential that failed too many checks. bucket names
// the credential presented (see [Gateway.credentialBucket]), never the
// caller's address: every local process is 127.0.0.1, so an address bucket
// let one process's failures lock out every agent and the owner.
func (g *Gateway) throttled(bucket string) error {
	if g.d.Throttle == nil {
		return nil
	}
	if ok, retry := g.d.Throttle.Allow(bucket); !ok {
		e := plexus.Errorf(plexus.CodeRateLimited, "too many failed attempts with this credential; retry in %s", retry.Round(time.Second))
		e.Detail = map[string]any{"retryAfterSeconds": int64(retry.Seconds() + 0.999)}
		return e
	}
	return nil
}

// credentialFailed throttles bucket and journals a failed credential attempt.
// The presented credential itself is never recorded, and a flood of failures
// of one kind and reason coalesces into one row per window.
func (g *Gateway) credentialFailed(ctx context.Context, bucket, remote, kind, reason string) {
	if g.d.Throttle != nil {
		g.d.Throttle.Fail(bucket)
	}
	a := &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "auth.failed",
		Target: kind, Payload: map[string]any{"remote": remote, "reason": reason}}
	if _, err := g.journalDenial(ctx, denialKey{action: a.ActionType, subject: kind, code: reason}, a); err != nil {
		g.JournalFailed(a.ActionType+" "+kind, err)
	}
}

func (g *Gateway) credentialOK(bucket string) {
	if g.d.Throttle != nil {
		g.d.Throttle.Succeed(bucket)
	}
}

// credentialBucket names the throttle bucket of a presented credential of
// kind ("pat", "key", "enroll"): the kind and a prefix of the credential's
// keyed hash, so the secret itself is never held. A credential shaped wrong
// for its kind (wrong prefix, too short) could never be valid: all such
// garbage of one kind shares one bucket of its own.
//
// No credential Plexus issues carries a public id (a PAT is plx_agent_ and
// 32 random bytes), so a failure can only be charged to the exact value that
// failed. That is what makes the guarantee hold: a valid credential's bucket
// holds only its own failures, so a flood of other values never makes it
// fail. It also means the throttle stops a client retrying one stale or
// wrong credential, not a guesser presenting a fresh value each time: that
// one is stopped by the 192 to 256 bits of each secret, and its journal rows
// coalesce (see journalDenial).
func (g *Gateway) credentialBucket(kind, prefix, secret string) string {
	if !strings.HasPrefix(secret, prefix) || len(secret) < len(prefix)+16 {
		return kind + ":malformed"
	}
	return kind + ":" + hex.EncodeToString(g.d.Hasher.Hash(secret)[:16])
}

func (g *Gateway) url(path string) string { return g.cfg.BaseURL + path }

// sameUser reports whether the caller's connection belongs to the owner's
// OS user. Unknown counts as not the same user: detection warns where the
// OS lets it, it is not an access control on its own.
func (g *Gateway) sameUser(c Credentials) bool {
	if !g.cfg.SameUser.Detect || c.PeerUID == nil {
		return false
	}
	uid, ok := c.PeerUID()
	return ok && uid == g.cfg.SameUser.OwnerUID
}

// refuseSameUser applies strict mode: a same-user agent is refused, and the
// refusal journaled.
func (g *Gateway) refuseSameUser(ctx context.Context, c Credentials, step string) error {
	if !g.cfg.SameUser.Refuse || !g.sameUser(c) {
		return nil
	}
	// A refused process may retry as fast as it likes: its rows coalesce.
	a := &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "auth.same_user_refused",
		Target: step, Payload: map[string]any{"remote": c.Remote}}
	if _, err := g.journalDenial(ctx, denialKey{action: a.ActionType, subject: step}, a); err != nil {
		g.JournalFailed(a.ActionType+" "+step, err)
	}
	return plexus.Errorf(plexus.CodeUnauthorized,
		"strict mode: this agent runs as the owner's own OS user, which can read PLEXUS_HOME; run it as another user (auth-config.json strictSameUser)")
}

// Note journals something a transport or the daemon observed (an ipc peer
// refused, a provider restarted, a duplicate result ignored) as a system
// activity. The payload must already be free of secrets and raw call
// content: the journal keeps it verbatim. What was observed has happened:
// a row that cannot be written is logged and counted ([Gateway.JournalFailed]).
func (g *Gateway) Note(ctx context.Context, action, target, traceID string, payload map[string]any) {
	g.recordAnyway(ctx, &plexus.Activity{TraceID: traceID, Actor: plexus.ActorSystem, ActionType: action, Target: target, Payload: payload})
}
