package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// Agent is the agent-side client. It enrolls once, then handshakes under its
// PAT, requests grants, holds and refreshes tokens, and invokes, keeping its
// credential, session and tokens in a [CredStore].
//
// An Agent is safe for concurrent use.
type Agent struct {
	conn  *conn
	store *CredStore
	info  plexus.ClientInfo
	now   func() time.Time

	mu       sync.Mutex // guards sess and manifest, never held across I/O
	sess     *cachedSession
	manifest *plexus.Manifest
}

// NewAgent returns an agent client for the gateway at baseURL (for example
// http://127.0.0.1:7077) keeping its state in store.
func NewAgent(baseURL string, store *CredStore, opts ...Option) (*Agent, error) {
	if store == nil {
		return nil, errors.New("new agent client: nil credential store")
	}
	cfg := newConfig(opts)
	c, err := newConn(baseURL, cfg)
	if err != nil {
		return nil, err
	}
	return &Agent{conn: c, store: store, info: cfg.info, now: cfg.now}, nil
}

// Enroll redeems a one-time enrollment code for the agent's PAT and stores
// it, returning the agent id the code was bound to. When the store already
// holds a credential, Enroll refuses before spending the code (the error
// wraps [ErrAlreadyEnrolled]) unless force is true.
func (a *Agent) Enroll(ctx context.Context, code string, force bool) (string, error) {
	if code == "" {
		return "", errors.New("enroll: empty code")
	}
	if !force {
		old, err := a.store.Credentials()
		if err == nil {
			return "", fmt.Errorf("enroll: %w as %q at %s; enroll with force to replace it", ErrAlreadyEnrolled, old.AgentID, old.BaseURL)
		}
		if !errors.Is(err, ErrNotEnrolled) {
			return "", fmt.Errorf("enroll: %w", err)
		}
	}
	// Fail on an unwritable store before the single-use code is spent.
	if err := a.store.ensureDir(); err != nil {
		return "", fmt.Errorf("enroll: %w", err)
	}
	var resp plexus.EnrollResponse
	if _, err := a.conn.call(ctx, request{method: http.MethodPost, path: "/agents/enroll", body: plexus.EnrollRequest{Code: code}}, &resp); err != nil {
		return "", err
	}
	if resp.PAT == "" || resp.AgentID == "" {
		return "", errors.New("enroll: the gateway answered without a PAT or agent id")
	}
	creds := Credentials{BaseURL: a.conn.baseURL(), AgentID: resp.AgentID, PAT: resp.PAT}
	if err := a.store.SaveCredentials(creds, true); err != nil {
		return "", fmt.Errorf("enroll: the code is spent but the PAT could not be stored (ask the owner for a new code): %w", err)
	}
	a.mu.Lock()
	a.sess, a.manifest = nil, nil
	a.mu.Unlock()
	return resp.AgentID, nil
}

// Handshake opens a new session under the stored PAT and returns it with the
// full manifest. Later calls reuse the session while it lives.
func (a *Agent) Handshake(ctx context.Context) (*plexus.HandshakeResponse, error) {
	creds, err := a.store.Credentials()
	if err != nil {
		return nil, err
	}
	info := a.info
	var resp plexus.HandshakeResponse
	req := request{method: http.MethodPost, path: "/link/handshake", bearer: creds.PAT, body: plexus.HandshakeRequest{Client: &info}}
	if _, err := a.conn.call(ctx, req, &resp); err != nil {
		return nil, err
	}
	if resp.SessionID == "" {
		return nil, errors.New("handshake: the gateway answered without a session id")
	}
	sess := &cachedSession{ID: resp.SessionID, ExpiresAt: resp.ExpiresAt}
	mani := resp.Manifest
	a.mu.Lock()
	a.sess, a.manifest = sess, &mani
	a.mu.Unlock()
	err = a.store.updateCache(func(c *tokenCache) {
		c.Session = sess
		// A pending request's token goes only to the session that asked:
		// one asked from another session can no longer be resumed.
		c.Pending = slices.DeleteFunc(c.Pending, func(p pendingRequest) bool { return p.SessionID != sess.ID })
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// session returns a live session and its manifest: the one in memory, else
// the cached one (re-fetching GET /manifest under it), else a new handshake.
func (a *Agent) session(ctx context.Context) (*cachedSession, *plexus.Manifest, error) {
	a.mu.Lock()
	sess, mani := a.sess, a.manifest
	a.mu.Unlock()
	now := a.now()
	if !sess.live(now) {
		c, err := a.store.loadCache()
		if err != nil {
			return nil, nil, err
		}
		sess, mani = c.Session, nil
	}
	if sess.live(now) {
		if mani != nil {
			return sess, mani, nil
		}
		m, err := a.fetchManifest(ctx, sess)
		if err == nil {
			return sess, m, nil
		}
		var ce *Error
		if !errors.As(err, &ce) || (ce.Status != http.StatusUnauthorized && ce.Status != http.StatusForbidden) {
			return nil, nil, err
		}
		// The cached session died early (a revoke, a restart): handshake anew.
	}
	resp, err := a.Handshake(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &cachedSession{ID: resp.SessionID, ExpiresAt: resp.ExpiresAt}, &resp.Manifest, nil
}

func (a *Agent) fetchManifest(ctx context.Context, sess *cachedSession) (*plexus.Manifest, error) {
	var resp plexus.ManifestResponse
	if _, err := a.conn.call(ctx, request{method: http.MethodGet, path: "/manifest", session: sess.ID}, &resp); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.sess, a.manifest = sess, &resp.Manifest
	a.mu.Unlock()
	return &resp.Manifest, nil
}

// entry finds id in the session's manifest, re-fetching the manifest once
// when it is not there (a source may have come online since).
func (a *Agent) entry(ctx context.Context, sess *cachedSession, mani *plexus.Manifest, id string) (plexus.Entry, error) {
	if e, ok := findEntry(mani, id); ok {
		return e, nil
	}
	m, err := a.fetchManifest(ctx, sess)
	if err != nil {
		return plexus.Entry{}, err
	}
	if e, ok := findEntry(m, id); ok {
		return e, nil
	}
	return plexus.Entry{}, &Error{Status: http.StatusNotFound, Body: plexus.ErrorBody{
		Code: plexus.CodeUnknownCapability, Message: fmt.Sprintf("no capability %q in the manifest", id), CapabilityID: id,
	}}
}

func findEntry(m *plexus.Manifest, id string) (plexus.Entry, bool) {
	if m == nil {
		return plexus.Entry{}, false
	}
	for _, e := range m.Entries {
		if e.ID == id {
			return e, true
		}
	}
	return plexus.Entry{}, false
}

// requiredVerbs is what an invoke of e needs a scope to carry.
func requiredVerbs(e plexus.Entry) []plexus.Verb {
	v := plexus.NormalizeVerbs(e.Grants)
	if len(v) == 0 {
		return []plexus.Verb{plexus.VerbRead}
	}
	return v
}

// Reasons an entry is callable now ([ListEntry.Via]).
const (
	ViaToken    = "token"
	ViaStanding = "standing"
	// ViaAutoApprove: no grant is held yet, but the first call's request
	// is one the shipped confirm-risky policy approves by itself (a read
	// of a first-party or managed capability), so the call runs without
	// the owner. A grant the owner revoked is not asked for this way again.
	ViaAutoApprove = "auto-approve"
)

// ListEntry is one manifest entry as the agent sees it: what it is, what it
// costs to ask for, and whether it can be called without asking anyone.
type ListEntry struct {
	ID                     string              `json:"id"`
	Kind                   plexus.EntryKind    `json:"kind"`
	Label                  string              `json:"label"`
	Describe               string              `json:"describe,omitempty"`
	Verbs                  []plexus.Verb       `json:"verbs"`
	Provenance             plexus.Provenance   `json:"provenance"`
	Sensitivity            plexus.Sensitivity  `json:"sensitivity,omitempty"`
	RecommendedTrustWindow *plexus.TrustWindow `json:"recommendedTrustWindow,omitempty"`
	Health                 *plexus.Health      `json:"health,omitempty"`
	// CallableNow is true when a call runs without waiting for the owner:
	// a held token covers the entry (live, or refreshable within its grant
	// window), a standing grant does, or the first call's grant request is
	// approved by policy. False means a call asks the owner.
	CallableNow bool `json:"callableNow"`
	// Via says why it is callable now: [ViaToken], [ViaStanding] or
	// [ViaAutoApprove].
	Via string `json:"via,omitempty"`
}

// List returns the manifest's entries annotated callable-now or not. An entry
// without a provenance is reported as extension, the strictest class, as the
// protocol says to treat it.
func (a *Agent) List(ctx context.Context) ([]ListEntry, error) {
	out, err := a.list(ctx)
	if CodeOf(err) == plexus.CodeSessionExpired {
		a.dropSession()
		out, err = a.list(ctx)
	}
	return out, err
}

func (a *Agent) list(ctx context.Context) ([]ListEntry, error) {
	sess, mani, err := a.session(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := a.store.loadCache()
	if err != nil {
		return nil, err
	}
	ledger, err := a.standingGrants(ctx, sess)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]ListEntry, 0, len(mani.Entries))
	for _, e := range mani.Entries {
		need := requiredVerbs(e)
		le := ListEntry{
			ID: e.ID, Kind: e.Kind, Label: e.Label, Describe: e.Describe, Verbs: need,
			Provenance: e.Provenance, Sensitivity: e.Sensitivity,
			RecommendedTrustWindow: e.RecommendedTrustWindow, Health: e.Health,
		}
		if le.Provenance == "" {
			le.Provenance = plexus.ProvenanceExtension
		}
		switch {
		case hasToken(cache.Tokens, e.ID, need, now):
			le.CallableNow, le.Via = true, ViaToken
		case e.Standing != nil && *e.Standing, hasStanding(ledger, e.ID, need, now):
			le.CallableNow, le.Via = true, ViaStanding
		case autoApproves(le) && !slices.Contains(cache.Revoked, e.ID):
			le.CallableNow, le.Via = true, ViaAutoApprove
		}
		out = append(out, le)
	}
	return out, nil
}

// autoApproves reports whether the shipped confirm-risky policy approves a
// request for e by itself: read-only, on a first-party or managed
// capability that is not known to be unavailable (auth.UserConfirmAuthorizer).
func autoApproves(e ListEntry) bool {
	if e.Health != nil && e.Health.Status == plexus.HealthUnavailable {
		return false
	}
	trusted := e.Provenance == plexus.ProvenanceFirstParty || e.Provenance == plexus.ProvenanceManaged
	return trusted && !slices.ContainsFunc(e.Verbs, plexus.Verb.Mutating)
}

// standingGrants reads the caller's standing-grant ledger (GET /grants). A
// gateway without the endpoint (404) simply contributes nothing.
func (a *Agent) standingGrants(ctx context.Context, sess *cachedSession) ([]plexus.StandingGrant, error) {
	var resp plexus.GrantsListResponse
	_, err := a.conn.call(ctx, request{method: http.MethodGet, path: "/grants", session: sess.ID}, &resp)
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return nil, nil
	}
	return resp.Grants, err
}

func hasToken(tokens []HeldToken, id string, need []plexus.Verb, now time.Time) bool {
	for _, t := range tokens {
		if !t.Covers(id, need) {
			continue
		}
		if now.Before(t.ExpiresAt) || (!t.GrantExpiresAt.IsZero() && now.Before(t.GrantExpiresAt)) {
			return true
		}
	}
	return false
}

func hasStanding(grants []plexus.StandingGrant, id string, need []plexus.Verb, now time.Time) bool {
	for _, g := range grants {
		if g.CapabilityID == id && g.Standing && now.Before(g.ExpiresAt) && plexus.CoversVerbs(g.Verbs, need) {
			return true
		}
	}
	return false
}

// RegisterExtension asks the gateway to register m (POST /extensions). The
// gateway never registers an agent's extension at once: the answer carries
// the pending decision the owner is asked to make, and its status is
// polled like a grant's (GET /grants/status?pendingId=…).
func (a *Agent) RegisterExtension(ctx context.Context, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error) {
	sess, _, err := a.session(ctx)
	if err != nil {
		return plexus.ExtensionRegisterResponse{}, err
	}
	status, data, err := a.conn.send(ctx, request{method: http.MethodPost, path: "/extensions", session: sess.ID,
		body: plexus.ExtensionRegisterRequest{SessionID: sess.ID, Manifest: m}})
	if err != nil {
		return plexus.ExtensionRegisterResponse{}, err
	}
	if status != http.StatusAccepted && status != http.StatusOK {
		return plexus.ExtensionRegisterResponse{}, decodeError(status, data)
	}
	var resp plexus.ExtensionRegisterResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return plexus.ExtensionRegisterResponse{}, fmt.Errorf("POST /extensions: decode: %w", err)
	}
	return resp, nil
}
