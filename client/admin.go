package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// Admin is the owner's client of the management plane (/admin/api/*), which
// takes the connection-key as Authorization: Bearer plx_live_…. The same key
// also revokes grants and tokens on POST /grants/revoke.
//
// An Admin is safe for concurrent use.
type Admin struct {
	conn *conn

	mu  sync.Mutex // guards key, which RotateKey replaces
	key string
}

// NewAdmin returns an admin client for the gateway at baseURL, authenticated
// by connectionKey. It sends nothing to a gateway whose listening socket
// belongs to another user ([ForeignListenerError]; checked where the OS
// tells, on Linux).
func NewAdmin(baseURL, connectionKey string, opts ...Option) (*Admin, error) {
	if connectionKey == "" {
		return nil, errors.New("new admin client: empty connection-key")
	}
	c, err := newConn(baseURL, newConfig(append(opts[:len(opts):len(opts)], ownListener())))
	if err != nil {
		return nil, err
	}
	return &Admin{conn: c, key: connectionKey}, nil
}

func (a *Admin) do(ctx context.Context, method, path string, in, out any) error {
	return a.doQuery(ctx, method, path, nil, in, out)
}

func (a *Admin) doQuery(ctx context.Context, method, path string, query url.Values, in, out any) error {
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	_, err := a.conn.call(ctx, request{method: method, path: path, query: query, bearer: key, body: in}, out)
	return err
}

// Connect registers an agent with its starting standing grants and returns
// the one-time enrollment code (shown once).
func (a *Admin) Connect(ctx context.Context, req plexus.ConnectRequest) (plexus.ConnectResponse, error) {
	var resp plexus.ConnectResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/agents/connect", req, &resp)
	return resp, err
}

// RevokeAgent revokes an agent's PAT, sessions, tokens and grants.
func (a *Admin) RevokeAgent(ctx context.Context, agentID, reason string) (plexus.AgentRevokeResponse, error) {
	var resp plexus.AgentRevokeResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/agents/revoke", plexus.AgentRevokeRequest{AgentID: agentID, Reason: reason}, &resp)
	return resp, err
}

// Agents lists connected and enrolled agents.
func (a *Admin) Agents(ctx context.Context) ([]plexus.Agent, error) {
	var raw json.RawMessage
	if err := a.do(ctx, http.MethodGet, "/admin/api/agents", nil, &raw); err != nil {
		return nil, err
	}
	var resp struct {
		Agents []plexus.Agent `json:"agents"`
	}
	if err := decodeList(raw, &resp.Agents, &resp); err != nil {
		return nil, fmt.Errorf("GET /admin/api/agents: decode response: %w", err)
	}
	return resp.Agents, nil
}

// decodeList reads a listing that is either a bare JSON array (into list)
// or an object wrapping it (into wrapper).
func decodeList(raw json.RawMessage, list, wrapper any) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil
	case raw[0] == '[':
		return json.Unmarshal(raw, list)
	}
	return json.Unmarshal(raw, wrapper)
}

// Grants lists every agent's standing grants.
func (a *Admin) Grants(ctx context.Context) ([]plexus.StandingGrant, error) {
	var resp plexus.GrantsListResponse
	err := a.do(ctx, http.MethodGet, "/admin/api/grants", nil, &resp)
	return resp.Grants, err
}

// Pending lists decisions waiting for the owner.
func (a *Admin) Pending(ctx context.Context) ([]plexus.Pending, error) {
	var resp plexus.PendingListResponse
	err := a.do(ctx, http.MethodGet, "/admin/api/pending", nil, &resp)
	return resp.Pending, err
}

// ShowPending returns one decision, pending or decided.
func (a *Admin) ShowPending(ctx context.Context, id string) (plexus.Pending, error) {
	var p plexus.Pending
	err := a.do(ctx, http.MethodGet, "/admin/api/pending/"+url.PathEscape(id), nil, &p)
	return p, err
}

// RotateKey replaces the connection-key and returns the new one (shown
// once). This client switches to the new key.
func (a *Admin) RotateKey(ctx context.Context) (plexus.KeyRotateResponse, error) {
	var resp plexus.KeyRotateResponse
	if err := a.do(ctx, http.MethodPost, "/admin/api/key/rotate", nil, &resp); err != nil {
		return resp, err
	}
	if resp.ConnectionKey != "" {
		a.mu.Lock()
		a.key = resp.ConnectionKey
		a.mu.Unlock()
	}
	return resp, nil
}

// PruneJournal asks the gateway to delete the activity rows written before
// req.Before (`plexus journal prune` while the daemon runs).
func (a *Admin) PruneJournal(ctx context.Context, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, error) {
	var resp plexus.JournalPruneResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/journal/prune", req, &resp)
	return resp, err
}

// Status returns the gateway's health summary.
func (a *Admin) Status(ctx context.Context) (plexus.StatusResponse, error) {
	var resp plexus.StatusResponse
	err := a.do(ctx, http.MethodGet, "/admin/api/status", nil, &resp)
	return resp, err
}

// sourceWire is a source on the admin wire: Config travels as the JSON value
// it holds (a portal's {"path": …, "alias": …}), not as base64.
type sourceWire struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Provenance plexus.Provenance `json:"provenance,omitempty"`
	Config     json.RawMessage   `json:"config,omitempty"`
	CreatedAt  time.Time         `json:"createdAt,omitzero"`
}

func (w sourceWire) config() plexus.SourceConfig {
	cfg := []byte(w.Config)
	// Tolerate a gateway that sends the byte slice's default base64 form.
	var b64 []byte
	if len(cfg) > 0 && cfg[0] == '"' && json.Unmarshal(cfg, &b64) == nil && json.Valid(b64) {
		cfg = b64
	}
	return plexus.SourceConfig{ID: w.ID, Kind: w.Kind, Provenance: w.Provenance, Config: cfg, CreatedAt: w.CreatedAt}
}

// Sources lists the owner-configured sources; each Config is the JSON value
// the source was configured with.
func (a *Admin) Sources(ctx context.Context) ([]plexus.SourceConfig, error) {
	var raw json.RawMessage
	if err := a.do(ctx, http.MethodGet, "/admin/api/sources", nil, &raw); err != nil {
		return nil, err
	}
	var resp struct {
		Sources []sourceWire `json:"sources"`
	}
	if err := decodeList(raw, &resp.Sources, &resp); err != nil {
		return nil, fmt.Errorf("GET /admin/api/sources: decode response: %w", err)
	}
	out := make([]plexus.SourceConfig, len(resp.Sources))
	for i, w := range resp.Sources {
		out[i] = w.config()
	}
	return out, nil
}

// AddSource adds an owner-configured source and brings it online. cfg.Config
// must hold a JSON value.
func (a *Admin) AddSource(ctx context.Context, cfg plexus.SourceConfig) (plexus.SourceConfig, error) {
	return a.addSource(ctx, cfg, nil)
}

// ReplaceSource re-registers a source the owner added before, of the same
// kind, in place.
func (a *Admin) ReplaceSource(ctx context.Context, cfg plexus.SourceConfig) (plexus.SourceConfig, error) {
	return a.addSource(ctx, cfg, url.Values{"replace": {"true"}})
}

func (a *Admin) addSource(ctx context.Context, cfg plexus.SourceConfig, query url.Values) (plexus.SourceConfig, error) {
	if !json.Valid(cfg.Config) {
		return plexus.SourceConfig{}, errors.New("add source: config is not JSON")
	}
	in := sourceWire{ID: cfg.ID, Kind: cfg.Kind, Provenance: cfg.Provenance, Config: cfg.Config}
	var resp sourceWire
	if err := a.doQuery(ctx, http.MethodPost, "/admin/api/sources", query, in, &resp); err != nil {
		return plexus.SourceConfig{}, err
	}
	return resp.config(), nil
}

// RemoveSource removes an owner-configured source; its grants stay in the
// ledger (flagged) until revoked.
func (a *Admin) RemoveSource(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/admin/api/sources/"+url.PathEscape(id), nil, nil)
}

// RemoveSourcePurging removes an owner-configured source and revokes every
// grant of its entries.
func (a *Admin) RemoveSourcePurging(ctx context.Context, id string) error {
	return a.doQuery(ctx, http.MethodDelete, "/admin/api/sources/"+url.PathEscape(id), url.Values{"purge": {"grants"}}, nil, nil)
}

// RevokeGrant revokes agentID's grant on capabilityID and every token
// carrying it, so refresh cannot re-mint it.
func (a *Admin) RevokeGrant(ctx context.Context, agentID, capabilityID, reason string) (plexus.RevokeResponse, error) {
	var resp plexus.RevokeResponse
	err := a.do(ctx, http.MethodPost, "/grants/revoke", plexus.RevokeRequest{AgentID: agentID, CapabilityID: capabilityID, Reason: reason}, &resp)
	return resp, err
}

// LiveSources is the running gateway's sources' status by source id; ok is
// false when the gateway did not answer.
func (a *Admin) LiveSources(ctx context.Context) (live map[string]plexus.SourceStatus, ok bool) {
	st, err := a.Status(ctx)
	if err != nil {
		return nil, false
	}
	live = map[string]plexus.SourceStatus{}
	for _, s := range st.Sources {
		live[s.ID] = s
	}
	return live, true
}

// ConsoleLink is a one-time sign-in link to the owner's web console.
type ConsoleLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// ConsoleLink asks the daemon for a one-time sign-in link to its console.
func (a *Admin) ConsoleLink(ctx context.Context) (ConsoleLink, error) {
	var resp ConsoleLink
	err := a.do(ctx, http.MethodPost, "/console/link", nil, &resp)
	return resp, err
}
