package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// sessionHeader is the MCP session id header of 2025-11-25.
const sessionHeader = "Mcp-Session-Id"

// A link is one Plexus session of an agent, opened with its PAT, that an
// MCP session (or a sessionless client) speaks through. Only the PAT's hash
// is kept: it is compared, never shown.
type link struct {
	session string // the Plexus session id
	client  string // the MCP client's name, for a grant's purpose
	patHash [32]byte
	// user is patHash in hex, the UserID every request of the link gives
	// the SDK (linkToken).
	user    string
	expires time.Time

	// mu guards tokens, pending and agent, shared by the link's
	// concurrent calls.
	mu sync.Mutex
	// agent is the link's agent id, once agentKnown (see [Server.view]).
	agent      string
	agentKnown bool
	// tokens holds the latest token minted for each capability; a token
	// for an execute entry is never kept (each execute call asks).
	tokens map[string]plexus.ScopedToken
	// pending remembers the decision a call asked for and left undecided,
	// so the next call waits on it instead of asking again.
	pending map[string]string

	// cat is the link's catalog at one catalog revision and view (index.go).
	cat atomic.Pointer[cachedCatalog]
}

// bears reports whether bearer is the PAT the link was opened with.
func (l *link) bears(bearer string) bool {
	h := sha256.Sum256([]byte(bearer))
	return subtle.ConstantTimeCompare(h[:], l.patHash[:]) == 1
}

func (l *link) creds() gateway.Credentials { return gateway.Credentials{SessionID: l.session} }

// links finds the link of a request: by its MCP session id (2025-11-25),
// or by its PAT and client (2026-07-28, where requests carry no session).
// Expired links are pruned whenever one is added.
type links struct {
	now       func() time.Time
	mu        sync.Mutex
	bySession map[string]*link
	byClient  map[string]*link
}

func newLinks(now func() time.Time) *links {
	return &links{now: now, bySession: map[string]*link{}, byClient: map[string]*link{}}
}

func (ls *links) session(id string) *link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.bySession[id]
}

// bind makes l the link of the MCP session id, once its initialize
// succeeded.
func (ls *links) bind(id string, l *link) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.prune(ls.now())
	ls.bySession[id] = l
}

func (ls *links) drop(id string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.bySession, id)
}

func (ls *links) client(key string) *link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byClient[key]
}

func (ls *links) putClient(key string, l *link) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.prune(ls.now())
	ls.byClient[key] = l
}

// forget drops every entry of l: its Plexus session ended.
func (ls *links) forget(l *link) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, m := range []map[string]*link{ls.bySession, ls.byClient} {
		for k, v := range m {
			if v == l {
				delete(m, k)
			}
		}
	}
}

func (ls *links) prune(now time.Time) {
	for _, m := range []map[string]*link{ls.bySession, ls.byClient} {
		for k, v := range m {
			if !now.Before(v.expires) {
				delete(m, k)
			}
		}
	}
}

// refusal is an HTTP answer given before the SDK sees the request.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) write(w http.ResponseWriter) {
	if r.status == http.StatusUnauthorized {
		unauthorized(w, r.msg)
		return
	}
	http.Error(w, r.msg, r.status)
}

// unauthorized answers 401 with the challenge; msg never echoes what the
// caller sent.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	http.Error(w, msg, http.StatusUnauthorized)
}

// bearerOf is the request's Authorization: Bearer credential.
func bearerOf(r *http.Request) (string, bool) {
	const scheme = "bearer "
	a := r.Header.Get("Authorization")
	if len(a) <= len(scheme) || !strings.EqualFold(a[:len(scheme)], scheme) {
		return "", false
	}
	b := strings.TrimSpace(a[len(scheme):])
	return b, b != ""
}

// sessionLink is the link of a 2025-11-25 request: the one bound to its
// MCP session, when it bears that session's PAT, or a new one for an
// initialize. Another credential than the session's is answered exactly
// like an unknown session, so a session id tells its holder nothing.
func (s *Server) sessionLink(r *http.Request, bearer string) (*link, *refusal) {
	if id := r.Header.Get(sessionHeader); id != "" {
		l := s.links.session(id)
		if l == nil || !l.bears(bearer) || !s.opts.Clock().Before(l.expires) {
			return nil, &refusal{http.StatusNotFound, "session not found: initialize a new session"}
		}
		return l, nil
	}
	if r.Method != http.MethodPost {
		return nil, &refusal{http.StatusBadRequest, "Bad Request: " + sessionHeader + " is required; start with initialize"}
	}
	body, ref := s.peek(r)
	if ref != nil {
		return nil, ref
	}
	client, ok := initializeClient(body)
	if !ok {
		return nil, &refusal{http.StatusBadRequest, "Bad Request: a request without " + sessionHeader + " must be initialize"}
	}
	return s.open(r, bearer, client)
}

// sessionlessLink is the link of a 2026-07-28 request: one Plexus session
// per PAT and client, opened by its first request and kept while it lives.
func (s *Server) sessionlessLink(r *http.Request, bearer string) (*link, *refusal) {
	body, ref := s.peek(r)
	if ref != nil {
		return nil, ref
	}
	client := metaClient(body)
	h := sha256.Sum256([]byte(bearer))
	key := hex.EncodeToString(h[:]) + "\n" + client.Name + "\n" + client.Version
	if l := s.links.client(key); l != nil && s.opts.Clock().Before(l.expires) {
		return l, nil
	}
	l, ref := s.open(r, bearer, client)
	if ref == nil {
		s.links.putClient(key, l)
	}
	return l, ref
}

// open handshakes with the PAT, recording the MCP client's name and
// version in the session and its session.opened row.
func (s *Server) open(r *http.Request, bearer string, client plexus.ClientInfo) (*link, *refusal) {
	c := gateway.Credentials{Bearer: bearer, Remote: r.RemoteAddr}
	if s.opts.PeerUID != nil {
		c.PeerUID = s.opts.PeerUID(r)
	}
	resp, err := s.b.Sessions.Handshake(r.Context(), c, plexus.HandshakeRequest{Client: &client})
	switch code := plexus.CodeOf(err); {
	case err == nil:
	case code == plexus.CodeUnauthorized:
		// The gateway's message is written for agents and never echoes
		// the credential ("unknown PAT", "this agent has been revoked").
		return nil, &refusal{http.StatusUnauthorized, plexus.AsError(err).Message}
	case code == plexus.CodeRateLimited:
		return nil, &refusal{http.StatusTooManyRequests, "too many failed credential attempts; wait and retry"}
	default:
		s.log.Error("mcp handshake", "err", err)
		return nil, &refusal{http.StatusServiceUnavailable, "the gateway could not open a session; retry"}
	}
	h := sha256.Sum256([]byte(bearer))
	return &link{session: resp.SessionID, client: client.Name, patHash: h, user: hex.EncodeToString(h[:]),
		expires: resp.ExpiresAt, tokens: map[string]plexus.ScopedToken{}, pending: map[string]string{}}, nil
}

// peek reads the body (capped) and puts it back for the SDK.
func (s *Server) peek(r *http.Request) ([]byte, *refusal) {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return nil, &refusal{http.StatusBadRequest, "Bad Request: could not read the body"}
	}
	if int64(len(body)) > s.opts.MaxBodyBytes {
		return nil, &refusal{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opts.MaxBodyBytes)}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// initializeClient is the clientInfo of body when it is an initialize
// request.
func initializeClient(body []byte) (plexus.ClientInfo, bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			ClientInfo plexus.ClientInfo `json:"clientInfo"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "initialize" {
		return plexus.ClientInfo{}, false
	}
	return plexus.ClientInfo{Name: m.Params.ClientInfo.Name, Version: m.Params.ClientInfo.Version}, true
}

// metaClient is the clientInfo a 2026-07-28 request carries in its _meta,
// or nothing.
func metaClient(body []byte) plexus.ClientInfo {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	var ci plexus.ClientInfo
	if json.Unmarshal(body, &m) == nil {
		if raw, ok := m.Params.Meta[mcp.MetaKeyClientInfo]; ok && json.Unmarshal(raw, &ci) == nil {
			return plexus.ClientInfo{Name: ci.Name, Version: ci.Version}
		}
	}
	return plexus.ClientInfo{}
}

// linkKey carries the request's link from ServeHTTP to linkToken.
type linkKey struct{}

// extraLink is the TokenInfo.Extra key of the link.
const extraLink = "plexus/link"

// linkToken is the SDK's token verifier: the bearer was matched to a link
// before (ServeHTTP), so it turns that link into the TokenInfo the SDK
// attaches to every message of the request. Its UserID (the PAT's hash, so
// the agent) is what the SDK holds an MCP session to, a second check behind
// [Server.sessionLink]'s.
func linkToken(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	l, _ := ctx.Value(linkKey{}).(*link)
	if l == nil {
		return nil, auth.ErrInvalidToken
	}
	// The link's expiry was checked on the gateway's clock already; the
	// SDK compares Expiration with the wall clock, so it gets one that only
	// has to outlast this request's check.
	return &auth.TokenInfo{UserID: l.user, Expiration: time.Now().Add(time.Minute),
		Extra: map[string]any{extraLink: l, postKey: ctx}}, nil
}

// linkOf is the link of an MCP request, nil when it came without one (a
// request the SDK made up, a test over another transport).
func linkOf(req mcp.Request) *link {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	l, _ := extra.TokenInfo.Extra[extraLink].(*link)
	return l
}
