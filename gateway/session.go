package gateway

import (
	"context"
	"errors"
	"iter"
	"regexp"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// WellKnown returns the pre-session discovery document: summaries only.
func (g *Gateway) WellKnown() plexus.WellKnownDocument {
	sums := make([]plexus.Summary, 0, g.d.Registry.Len())
	for e := range g.d.Registry.All() {
		sums = append(sums, e.Summarize())
	}
	base := g.cfg.BaseURL
	return plexus.WellKnownDocument{
		Gateway:      g.gatewayInfo(),
		Capabilities: sums,
		Auth: plexus.AuthAdvertisement{
			EnrollmentURL: base + "/agents/enroll",
			Enrollment: &plexus.EnrollmentAdvertisement{
				URL: base + "/agents/enroll", Method: "POST", Auth: "body.code",
				Body:    map[string]string{"code": "<one-time enrollment code (plx_enroll_…, delivered out of band)>"},
				Success: map[string]string{"pat": "<durable bearer PAT (plx_agent_…) — store it yourself>", "agentId": "<your agentId>"},
				ErrorCodes: []plexus.ErrorCode{plexus.CodeMalformed, plexus.CodeUnknownCode, plexus.CodeCodeExpired,
					plexus.CodeCodeConsumed, plexus.CodePersistFailed},
				PATStorage: "Store the returned PAT yourself (it is returned exactly ONCE), then present it as Authorization: Bearer plx_agent_… at handshake. Enrollment happens once; the stored PAT authenticates every later session.",
			},
			HandshakeURL: base + "/link/handshake", GrantsURL: base + "/grants",
			GrantRequestURL: base + "/grants", GrantRequestMethod: "PUT",
			SessionHeader: plexus.SessionHeader, RefreshURL: base + "/grants/refresh",
			RevokeURL: base + "/grants/revoke", GrantStatusURL: base + "/grants/status",
			InvokeURL: base + "/invoke", ManifestURL: base + "/manifest", EventsURL: base + "/events",
			GrantsListURL: base + "/grants", TokenScheme: "plexus-scoped-jwt",
			RequestShapes: &plexus.AuthRequestShapes{
				Handshake: plexus.RequestShapeHint{URL: base + "/link/handshake", Method: "POST", Auth: "bearer(pat)",
					Headers: map[string]string{"Authorization": "Bearer <your PAT (plx_agent_…)>"},
					Body:    map[string]any{"client": map[string]any{"name": "<client name>", "version": "<client version>"}}},
				GrantRequest: plexus.RequestShapeHint{URL: base + "/grants", Method: "PUT", Auth: "header:" + plexus.SessionHeader,
					Body: map[string]any{"sessionId": "<sessionId>", "grants": map[string]any{"<capabilityId>": map[string]any{"decision": "allow", "verbs": []string{"read"}}}}},
				Invoke: plexus.RequestShapeHint{URL: base + "/invoke", Method: "POST", Auth: "bearer(scoped-jwt)",
					Body: map[string]any{"id": "<capabilityId>", "input": map[string]any{}}},
			},
		},
	}
}

func (g *Gateway) gatewayInfo() plexus.GatewayInfo {
	return plexus.GatewayInfo{Name: "plexus", Version: plexus.Version, Protocol: plexus.ProtocolFamily,
		BaseURL: g.cfg.BaseURL, Instance: g.cfg.Instance}
}

// Enroll redeems a one-time code for the agent's durable PAT. The code is
// consumed in the same transaction that stores the PAT's hash, so a failed
// write leaves it unconsumed (persist_failed, safe to retry) and concurrent
// redemptions of one code yield exactly one PAT.
func (g *Gateway) Enroll(ctx context.Context, remote string, req plexus.EnrollRequest) (plexus.EnrollResponse, error) {
	code := strings.TrimSpace(req.Code)
	bucket := g.credentialBucket("enroll", plexus.PrefixEnrollCode, code)
	if err := g.throttled(bucket); err != nil {
		return plexus.EnrollResponse{}, err
	}
	if !strings.HasPrefix(code, plexus.PrefixEnrollCode) || len(code) < len(plexus.PrefixEnrollCode)+16 {
		g.credentialFailed(ctx, bucket, remote, "enroll", "malformed code")
		return plexus.EnrollResponse{}, plexus.Errorf(plexus.CodeMalformed, "code must be a plx_enroll_… enrollment code")
	}
	pat, err := auth.NewPAT()
	if err != nil {
		return plexus.EnrollResponse{}, plexus.WrapError(plexus.CodePersistFailed, err, "could not mint a PAT")
	}
	hash := g.d.Hasher.Hash(code)
	now := g.now()
	var agentID string
	var fail *plexus.Error
	patHash := g.d.Hasher.Hash(pat)
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		agentID, fail, err = redeemCode(tx, hash, patHash, remote, now)
		if fail != nil {
			return fail
		}
		return err
	})
	if fail != nil {
		g.credentialFailed(ctx, bucket, remote, "enroll", string(fail.Code))
		return plexus.EnrollResponse{}, fail
	}
	if err != nil {
		return plexus.EnrollResponse{}, plexus.WrapError(plexus.CodePersistFailed, err, "could not record the enrollment; the code is still valid, retry")
	}
	g.credentialOK(bucket)
	return plexus.EnrollResponse{PAT: pat, AgentID: agentID}, nil
}

// redeemCode consumes the enrollment code of hash and stores patHash as its
// agent's PAT, with the agent.enrolled row, inside tx. A code that cannot
// be redeemed answers its typed refusal as fail and changes nothing.
func redeemCode(tx plexus.StateTx, hash, patHash []byte, remote string, now time.Time) (agentID string, fail *plexus.Error, err error) {
	ec, err := tx.EnrollCode(hash)
	if errors.Is(err, plexus.ErrNotFound) {
		return "", plexus.Errorf(plexus.CodeUnknownCode, "unknown enrollment code"), nil
	} else if err != nil {
		return "", nil, err
	}
	if fail := codeRefusal(ec, now); fail != nil {
		return "", fail, nil
	}
	agent, err := tx.Agent(ec.AgentID)
	if err != nil {
		return "", nil, err
	}
	if agent.RevokedAt != nil {
		return "", plexus.Errorf(plexus.CodeUnknownCode, "the agent this code was issued for has been revoked"), nil
	}
	ok, err := tx.ConsumeEnrollCode(hash, now)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", plexus.Errorf(plexus.CodeCodeConsumed, "this enrollment code was already redeemed"), nil
	}
	replaced := agent.PATHash != nil
	agent.PATHash = patHash
	agent.EnrolledAt = &now
	if err := tx.PutAgent(agent); err != nil {
		return "", nil, err
	}
	if replaced {
		// A new PAT replaces the old one: sessions opened under the
		// old PAT end with it (their tokens die with the session).
		if _, err := tx.RevokeSessions(plexus.SessionAgent, agent.ID, 0, now); err != nil {
			return "", nil, err
		}
	}
	return agent.ID, nil, tx.Record(&plexus.Activity{TraceID: ec.TraceID, Actor: agent.ID, AgentID: agent.ID,
		ActionType: "agent.enrolled", Target: agent.ID, Payload: map[string]any{"remote": remote}})
}

// codeRefusal answers why an enrollment code cannot be redeemed at now
// (consumed, or expired), or nil.
func codeRefusal(ec *plexus.EnrollCode, now time.Time) *plexus.Error {
	switch {
	case ec.ConsumedAt != nil:
		return plexus.Errorf(plexus.CodeCodeConsumed, "this enrollment code was already redeemed")
	case !now.Before(ec.ExpiresAt):
		return plexus.Errorf(plexus.CodeCodeExpired, "this enrollment code expired; ask the owner for a new one (plexus agents connect %s)", ec.AgentID)
	}
	return nil
}

// Handshake opens a session. The PAT path (Authorization: Bearer plx_agent_…)
// binds the session to the PAT's agent, whatever client.agentId says. The
// admin path (connectionKey in the body) may name an agent; without one the
// session is anonymous. The two paths never fall through to each other.
func (g *Gateway) Handshake(ctx context.Context, c Credentials, req plexus.HandshakeRequest) (plexus.HandshakeResponse, error) {
	hs, err := g.HandshakeStream(ctx, c, req)
	if err != nil {
		return plexus.HandshakeResponse{}, err
	}
	resp := hs.Head
	resp.Manifest = hs.Manifest.Collect()
	return resp, nil
}

// HandshakeStream is Handshake whose manifest entries are read one at a
// time (see [ManifestStream]): the session is open when it returns.
func (g *Gateway) HandshakeStream(ctx context.Context, c Credentials, req plexus.HandshakeRequest) (HandshakeStream, error) {
	sess, err := g.openSession(ctx, c, req)
	if err != nil {
		return HandshakeStream{}, err
	}
	m, err := g.manifest(ctx, sess)
	if err != nil {
		return HandshakeStream{}, err
	}
	head := plexus.HandshakeResponse{SessionID: sess.ID, ExpiresAt: sess.ExpiresAt, GrantsURL: g.url("/grants"), Manifest: m.Head}
	return HandshakeStream{Head: head, Manifest: m}, nil
}

func (g *Gateway) openSession(ctx context.Context, c Credentials, req plexus.HandshakeRequest) (*plexus.Session, error) {
	var client plexus.ClientInfo
	if req.Client != nil {
		client = *req.Client
	}
	switch {
	case c.Bearer != "" && req.ConnectionKey != "":
		return nil, plexus.Errorf(plexus.CodeInvalidRequest,
			"present either a PAT (Authorization: Bearer plx_agent_…) or a connectionKey, not both")
	case c.Bearer != "":
		return g.handshakeAgent(ctx, c, client)
	case req.ConnectionKey != "":
		return g.handshakeAdmin(ctx, c, req.ConnectionKey, client)
	}
	return nil, plexus.Errorf(plexus.CodeUnauthorized,
		"handshake needs Authorization: Bearer <PAT>; enroll first with your one-time code at POST /agents/enroll")
}

func (g *Gateway) handshakeAgent(ctx context.Context, c Credentials, client plexus.ClientInfo) (*plexus.Session, error) {
	bucket := g.credentialBucket("pat", plexus.PrefixPAT, c.Bearer)
	if err := g.throttled(bucket); err != nil {
		return nil, err
	}
	if err := g.refuseSameUser(ctx, c, "handshake"); err != nil {
		return nil, err
	}
	sameUser := g.sameUser(c)
	if !strings.HasPrefix(c.Bearer, plexus.PrefixPAT) {
		g.credentialFailed(ctx, bucket, c.Remote, "handshake", "bearer is not a PAT")
		return nil, plexus.Errorf(plexus.CodeUnauthorized, "the bearer credential is not an agent PAT (plx_agent_…)")
	}
	hash := g.d.Hasher.Hash(c.Bearer)
	now := g.now()
	var sess *plexus.Session
	var fail *plexus.Error
	err := g.update(ctx, false, func(tx plexus.StateTx) error {
		agent, err := tx.AgentByPATHash(hash)
		if errors.Is(err, plexus.ErrNotFound) {
			fail = plexus.Errorf(plexus.CodeUnauthorized, "unknown PAT")
			return fail
		} else if err != nil {
			return err
		}
		if agent.RevokedAt != nil {
			fail = plexus.Errorf(plexus.CodeUnauthorized, "this agent has been revoked by the owner")
			return fail
		}
		sess = &plexus.Session{ID: auth.NewID("sess_"), AgentID: agent.ID, Kind: plexus.SessionAgent,
			ClientName: clip(client.Name, 64), ClientVersion: clip(client.Version, 32),
			CreatedAt: now, ExpiresAt: now.Add(g.cfg.SessionTTL)}
		if err := tx.PutSession(sess); err != nil {
			return err
		}
		payload := map[string]any{"client": sess.ClientName, "clientVersion": sess.ClientVersion, "path": "pat"}
		if client.AgentID != "" && client.AgentID != agent.ID {
			payload["claimedAgentId"] = clip(client.AgentID, 64) // metadata only; the PAT decides
		}
		if sameUser {
			payload["sameUser"] = true
		}
		return tx.Record(&plexus.Activity{Actor: agent.ID, AgentID: agent.ID, ActionType: "session.opened",
			Target: sess.ID, Payload: payload})
	})
	if fail != nil {
		g.credentialFailed(ctx, bucket, c.Remote, "handshake", fail.Message)
		return nil, fail
	}
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not open a session")
	}
	g.credentialOK(bucket)
	if sameUser {
		g.mu.Lock()
		g.sameUserSeen[sess.AgentID] = true
		g.mu.Unlock()
		g.log.Warn("agent runs as the owner's OS user: it can read PLEXUS_HOME and move decision files; set strictSameUser in auth-config.json to refuse such agents",
			"agent", sess.AgentID)
	}
	return sess, nil
}

var agentIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (g *Gateway) handshakeAdmin(ctx context.Context, c Credentials, key string, client plexus.ClientInfo) (*plexus.Session, error) {
	bucket := g.credentialBucket("key", plexus.PrefixConnectionKey, key)
	if err := g.throttled(bucket); err != nil {
		return nil, err
	}
	if !g.checkKey(key) {
		g.credentialFailed(ctx, bucket, c.Remote, "handshake-admin", "wrong connection-key")
		return nil, plexus.Errorf(plexus.CodeUnauthorized, "wrong connection-key")
	}
	now := g.now()
	sess := &plexus.Session{ID: auth.NewID("sess_"), Kind: plexus.SessionAdmin,
		ClientName: clip(client.Name, 64), ClientVersion: clip(client.Version, 32),
		CreatedAt: now, ExpiresAt: now.Add(g.cfg.SessionTTL)}
	if client.AgentID != "" {
		if !agentIDPattern.MatchString(client.AgentID) {
			return nil, plexus.Errorf(plexus.CodeInvalidRequest, "client.agentId %q is not a valid agent id", client.AgentID)
		}
		sess.AgentID = client.AgentID
	} else {
		sess.Kind = plexus.SessionAnon
		sess.AgentID = "anon:" + strings.TrimPrefix(sess.ID, "sess_")
	}
	var fail *plexus.Error
	err := g.update(ctx, false, func(tx plexus.StateTx) error {
		// Again under the writer lock: a rotation that committed since the
		// check above has swapped the key, and its epoch is the one read
		// below, so a session opened with the old key must not start now.
		if !g.checkKey(key) {
			fail = plexus.Errorf(plexus.CodeUnauthorized, "wrong connection-key")
			return fail
		}
		epoch, err := keyEpoch(tx)
		if err != nil {
			return err
		}
		sess.KeyEpoch = epoch
		if err := tx.PutSession(sess); err != nil {
			return err
		}
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, AgentID: sess.AgentID, ActionType: "session.opened",
			Target: sess.ID, Payload: map[string]any{"client": sess.ClientName, "path": "connection-key", "kind": string(sess.Kind)}})
	})
	if fail != nil {
		g.credentialFailed(ctx, bucket, c.Remote, "handshake-admin", "wrong connection-key")
		return nil, fail
	}
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not open a session")
	}
	g.credentialOK(bucket)
	return sess, nil
}

// Manifest returns the current full manifest for the caller's session.
func (g *Gateway) Manifest(ctx context.Context, c Credentials) (plexus.ManifestResponse, error) {
	m, err := g.ManifestStream(ctx, c)
	if err != nil {
		return plexus.ManifestResponse{}, err
	}
	return plexus.ManifestResponse{Manifest: m.Collect()}, nil
}

// ManifestStream is Manifest whose entries are read one at a time.
func (g *Gateway) ManifestStream(ctx context.Context, c Credentials) (ManifestStream, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return ManifestStream{}, err
	}
	return g.manifest(ctx, sess)
}

// Revision is the catalog's current revision, the Revision of a manifest
// built now. It grows whenever the entry set changes (a source added,
// removed or rescanned, a definition held or released), so an edge that
// keeps a session's manifest knows, without a transaction, when it no
// longer shows the catalog.
func (g *Gateway) Revision() int64 { return g.d.Registry.Revision() }

// StateGeneration is the generation of the auth cache: it changes after
// every transaction that may change a token, session, agent or grant. An
// edge that keeps something derived from a session (the MCP front door's
// catalog) serves it only while the generation stays the same.
func (g *Gateway) StateGeneration() uint64 { return g.cache.gen.Load() }

// HandshakeStream is a handshake's answer with its manifest's entries left
// to be read one at a time: Head.Manifest has no entries.
type HandshakeStream struct {
	Head     plexus.HandshakeResponse
	Manifest ManifestStream
}

// ManifestStream is a manifest whose entries are read one at a time from
// the registry's snapshot instead of copied whole: on a large registry the
// manifest is tens of megabytes of JSON, and an edge streaming it then
// holds one entry at a time. Head has no entries; Entries yields them in
// manifest order, each valid until the next, and may be ranged over once
// (it reads the registry when ranged over, not when built).
type ManifestStream struct {
	Head    plexus.Manifest
	Entries iter.Seq[*plexus.Entry]
}

// Collect returns the whole manifest, Head with every entry.
func (m ManifestStream) Collect() plexus.Manifest {
	out := m.Head
	out.Entries = []plexus.Entry{}
	for e := range m.Entries {
		out.Entries = append(out.Entries, *e)
	}
	return out
}

// manifest stamps each entry with standing:true where this agent holds a live
// standing grant covering it: the live truth behind the static describe text.
// The grants are read now, so a failure to read them is an error before any
// entry is.
func (g *Gateway) manifest(ctx context.Context, sess *plexus.Session) (ManifestStream, error) {
	head := plexus.Manifest{Gateway: g.gatewayInfo(), SessionID: sess.ID, ExpiresAt: sess.ExpiresAt,
		Revision: g.d.Registry.Revision()}
	standing, err := g.standing(ctx, sess)
	if err != nil {
		return ManifestStream{}, err
	}
	all := g.d.Registry.All()
	if len(standing) == 0 {
		return ManifestStream{Head: head, Entries: all}, nil
	}
	t := true
	return ManifestStream{Head: head, Entries: func(yield func(*plexus.Entry) bool) {
		for e := range all {
			if v, ok := standing[e.ID]; ok && plexus.CoversVerbs(v, e.Grants) {
				e.Standing = &t
			}
			if !yield(e) {
				return
			}
		}
	}}, nil
}

// standing maps the capabilities an agent session holds a live standing
// grant on to the grant's verbs; nil for any other session.
func (g *Gateway) standing(ctx context.Context, sess *plexus.Session) (map[string][]plexus.Verb, error) {
	if sess.Kind != plexus.SessionAgent {
		return nil, nil
	}
	var grants []plexus.Grant
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		grants, err = tx.Grants(sess.AgentID, g.now())
		return err
	}); err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not read grants")
	}
	standing := make(map[string][]plexus.Verb, len(grants))
	for _, gr := range grants {
		if gr.Standing {
			standing[gr.CapabilityID] = gr.Verbs
		}
	}
	return standing, nil
}

// session returns the live session id names, or session_expired.
func (g *Gateway) session(ctx context.Context, id string) (*plexus.Session, error) {
	if id == "" {
		return nil, plexus.Errorf(plexus.CodeSessionExpired, "no session: send the %s header (handshake first)", plexus.SessionHeader)
	}
	var sess *plexus.Session
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		sess, err = g.liveSession(tx, id)
		return err
	})
	return sess, err
}

// liveSession checks a session's liveness inside tx: it exists, is not
// revoked or expired, and its agent has not been revoked.
func (g *Gateway) liveSession(tx authReader, id string) (*plexus.Session, error) {
	sess, err := tx.Session(id)
	if errors.Is(err, plexus.ErrNotFound) {
		return nil, plexus.Errorf(plexus.CodeSessionExpired, "unknown session; handshake again")
	} else if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not read the session")
	}
	if !sess.Live(g.now()) {
		return nil, plexus.Errorf(plexus.CodeSessionExpired, "session expired or ended; handshake again")
	}
	if sess.Kind == plexus.SessionAgent {
		agent, err := tx.Agent(sess.AgentID)
		if err != nil || agent.RevokedAt != nil {
			return nil, plexus.Errorf(plexus.CodeSessionExpired, "this agent has been revoked")
		}
	}
	return sess, nil
}

func clip(s string, n int) string {
	r := []rune(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s))
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}
