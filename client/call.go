package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// refreshMargin is how close to its expiry a held token is refreshed before
// use rather than presented.
const refreshMargin = time.Minute

// Backoff of the GET /grants/status poll while waiting for the owner.
const (
	pollFirst = 250 * time.Millisecond
	pollMax   = 2 * time.Second
)

// CallOptions tunes one [Agent.Call].
type CallOptions struct {
	// Purpose is the agent's free-text why, shown to the owner beside the
	// gateway's own narration (transparency only; it decides nothing).
	Purpose string
	// Verbs to request when a grant is needed. The entry's required verbs
	// are always included.
	Verbs []plexus.Verb
	// Wait makes a pending grant block until the owner decides (or
	// WaitTimeout passes); without it a pending grant returns at once.
	Wait bool
	// WaitTimeout bounds Wait; zero waits as long as ctx allows.
	WaitTimeout time.Duration
	// IdempotencyKey is passed to /invoke, so a retried call runs once.
	IdempotencyKey string
	// OnPending is called when the grant request pends, before any wait,
	// with the gateway's answer (its pendingNarration is what to relay). When
	// the call resumes an earlier request that still pends, it is called with
	// that request's id and narration, as GET /grants/status reports them.
	OnPending func(plexus.GrantPendingResponse)
	// OnProgress, when set, asks /invoke for a stream (Accept:
	// text/event-stream) and receives each piece of the running call — an
	// ipc tool's output chunks, an MCP server's progress — in order, on the
	// calling goroutine, before Call returns.
	OnProgress func(plexus.InvokeProgressEvent)
}

// Call invokes capability id with input, doing whatever the protocol asks
// first: handshake (reusing a live cached session), find a held token
// covering id and refresh it if it is near expiry, or request a grant (PUT
// /grants) and, when it pends, report it through opts.OnPending and wait for
// the owner if opts.Wait. A token_expired answer is refreshed and retried
// once; token_revoked re-grants once and session_expired re-handshakes once.
//
// A request that pended is remembered in the store until it is resolved, and
// a later Call for the same capability resumes it rather than asking again:
// it polls GET /grants/status once and takes the approved token, reports the
// same pending id (waiting on it if opts.Wait), or reports the owner's
// denial (the call after that asks anew). Only when the earlier request is
// over without a decision (expired, withdrawn, unknown to the gateway) or
// its session is gone — the approved token goes only to the session that
// asked — is the grant requested anew.
//
// The error is an [*Error] for every failure the gateway reported. When the
// invoke itself ran and failed (ok:false), the response is returned too, so
// an mcpResult stays readable. A grant still pending returns an error with
// code grant_pending_user and State pending; a denied one, grant_required
// with State denied (or expired, withdrawn).
func (a *Agent) Call(ctx context.Context, id string, input map[string]any, opts CallOptions) (*plexus.InvokeResponse, error) {
	var refreshed, regranted, rehandshook bool
	for {
		tok, fresh, err := a.tokenFor(ctx, id, opts)
		if err != nil {
			if CodeOf(err) == plexus.CodeSessionExpired && !rehandshook {
				// The cached session died behind our back (a gateway
				// restart, a revoke): handshake anew, once.
				rehandshook = true
				a.dropSession()
				continue
			}
			return nil, err
		}
		resp, status, err := a.invoke(ctx, tok, id, input, opts.IdempotencyKey, opts.OnProgress)
		if err != nil {
			return nil, err
		}
		if resp.OK {
			return resp, nil
		}
		switch code := resp.Error.Code; {
		case code == plexus.CodeTokenExpired && !refreshed:
			refreshed = true
			if _, err := a.refresh(ctx, tok); err != nil {
				if !isGatewayError(err) {
					return nil, err
				}
				a.forgetToken(tok.JTI)
			}
			continue
		case code == plexus.CodeTokenRevoked && opts.Purpose == "":
			if err := a.forgetRevoked(tok.JTI, id); err != nil {
				return nil, err
			}
			return nil, &RevokedError{CapabilityID: id}
		case code == plexus.CodeTokenRevoked && !regranted,
			code == plexus.CodeGrantRequired && !fresh && !regranted:
			// A cached token may predate a revoke or a narrowed grant.
			regranted = true
			a.forgetToken(tok.JTI)
			continue
		case code == plexus.CodeSessionExpired && !rehandshook:
			rehandshook = true
			a.forgetSession(tok.SessionID)
			continue
		}
		return resp, &Error{Status: status, Body: *resp.Error}
	}
}

// tokenFor returns a usable token covering id; fresh reports whether it was
// just granted (rather than taken from the cache).
func (a *Agent) tokenFor(ctx context.Context, id string, opts CallOptions) (HeldToken, bool, error) {
	sess, mani, err := a.session(ctx)
	if err != nil {
		return HeldToken{}, false, err
	}
	entry, err := a.entry(ctx, sess, mani, id)
	if err != nil {
		return HeldToken{}, false, err
	}
	need := requiredVerbs(entry)
	cache, err := a.store.loadCache()
	if err != nil {
		return HeldToken{}, false, err
	}
	now := a.now()
	if tok, ok := bestToken(cache.Tokens, id, need, now); ok {
		if now.Add(refreshMargin).Before(tok.ExpiresAt) {
			return tok, false, nil
		}
		nt, err := a.refresh(ctx, tok)
		if err == nil {
			return nt, false, nil
		}
		if !isGatewayError(err) {
			return HeldToken{}, false, err
		}
		// The grant behind it is gone or its session died: ask again.
		if CodeOf(err) != plexus.CodeTokenRevoked {
			a.forgetToken(tok.JTI)
		} else if err := a.forgetRevoked(tok.JTI, id); err != nil {
			return HeldToken{}, false, err
		} else {
			cache.Revoked = append(cache.Revoked, id)
		}
	}
	if slices.Contains(cache.Revoked, id) {
		if opts.Purpose == "" {
			return HeldToken{}, false, &RevokedError{CapabilityID: id}
		}
		if err := a.askedAgain(id); err != nil {
			return HeldToken{}, false, err
		}
	}
	verbs := plexus.NormalizeVerbs(append(slices.Clone(opts.Verbs), need...))
	if p, ok := cache.findPending(entry.ID); ok {
		tok, resumed, err := a.resume(ctx, sess, p, need, verbs, opts)
		if resumed || err != nil {
			return tok, true, err
		}
	}
	tok, err := a.grant(ctx, sess, entry.ID, need, verbs, opts)
	return tok, true, err
}

// resume takes up p, an earlier request for the capability that pended,
// instead of asking the owner again: one GET /grants/status under sess, then
// the approved token, the same pending outcome (or a wait on it, with
// opts.Wait), or the owner's denial. resumed is false, with p forgotten, when
// p is over without a decision to report — expired, withdrawn, unknown to
// the gateway, approved but with no token left to fetch, asked from another
// session than sess (its token cannot be fetched) or for fewer verbs than
// are wanted now — and the caller then requests anew.
func (a *Agent) resume(ctx context.Context, sess *cachedSession, p pendingRequest, need, verbs []plexus.Verb, opts CallOptions) (_ HeldToken, resumed bool, _ error) {
	id := p.CapabilityID
	if p.SessionID != sess.ID || !plexus.CoversVerbs(p.Verbs, verbs) {
		a.forgetPending(id, p.PendingID)
		return HeldToken{}, false, nil
	}
	var st plexus.GrantStatusResponse
	q := url.Values{"pendingId": {p.PendingID}}
	status, err := a.conn.call(ctx, request{method: http.MethodGet, path: "/grants/status", query: q, session: sess.ID}, &st)
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			return HeldToken{}, false, err // unreachable, say: remember it still
		}
		switch ce.Status {
		case http.StatusNotFound:
			a.forgetPending(id, p.PendingID)
			return HeldToken{}, false, nil
		case http.StatusUnauthorized, http.StatusForbidden:
			// The session that asked is gone (session_expired makes Call
			// handshake anew and ask again); its token cannot be fetched.
			a.forgetPending(id, p.PendingID)
		}
		return HeldToken{}, false, err
	}
	switch st.State {
	case plexus.StatePending:
		pr := plexus.GrantPendingResponse{Status: plexus.CodeGrantPendingUser, PendingID: p.PendingID,
			Pending: st.Capabilities, StatusURL: a.statusURL(p.PendingID), PendingNarration: st.PendingNarration}
		if len(pr.Pending) == 0 {
			pr.Pending = []string{id}
		}
		if opts.OnPending != nil {
			opts.OnPending(pr)
		}
		if !opts.Wait {
			e := pendingError(pr, id, fmt.Sprintf("the grant for %s still waits for the owner's approval (pending %s, asked earlier; not asked again)", id, p.PendingID))
			e.Resumed = true
			return HeldToken{}, true, e
		}
		tok, err := a.wait(ctx, sess, id, need, pr, opts.WaitTimeout)
		return tok, true, err
	case plexus.StateApproved:
		if st.Token == nil || st.Token.Token == "" {
			// Approved, but its grant has ended since (or was superseded):
			// nothing to fetch, so ask anew.
			a.forgetPending(id, p.PendingID)
			return HeldToken{}, false, nil
		}
		tok, err := a.keep(st.Token, sess.ID, id, need, status)
		if err == nil || isGatewayError(err) {
			a.forgetPending(id, p.PendingID)
		}
		return tok, true, err
	case plexus.StateDenied:
		a.forgetPending(id, p.PendingID)
		msg := fmt.Sprintf("the owner denied the earlier request for %s (pending %s)", id, p.PendingID)
		if st.Reason != "" {
			msg += ": " + st.Reason
		}
		e := deniedError(status, plexus.StateDenied, id, p.PendingID, msg+"; it was not asked again (calling again asks anew)")
		e.Resumed = true
		return HeldToken{}, true, e
	case plexus.StateExpired, plexus.StateWithdrawn:
		a.forgetPending(id, p.PendingID)
		return HeldToken{}, false, nil
	default:
		return HeldToken{}, true, fmt.Errorf("GET /grants/status: unknown state %q", st.State)
	}
}

// statusURL is where the pending decision pendingID is polled.
func (a *Agent) statusURL(pendingID string) string {
	return a.conn.baseURL() + "/grants/status?" + url.Values{"pendingId": {pendingID}}.Encode()
}

// bestToken picks the covering token that lives longest, among those still
// live or refreshable.
func bestToken(tokens []HeldToken, id string, need []plexus.Verb, now time.Time) (HeldToken, bool) {
	var best HeldToken
	found := false
	for _, t := range tokens {
		if !t.Covers(id, need) || (!now.Before(t.ExpiresAt) && !t.refreshable(now)) {
			continue
		}
		if !found || t.ExpiresAt.After(best.ExpiresAt) {
			best, found = t, true
		}
	}
	return best, found
}

// grant requests id with verbs (PUT /grants) and returns a token covering
// need, waiting for the owner when the request pends and opts.Wait is set.
func (a *Agent) grant(ctx context.Context, sess *cachedSession, id string, need, verbs []plexus.Verb, opts CallOptions) (HeldToken, error) {
	req := plexus.GrantRequest{SessionID: sess.ID, Grants: map[string]plexus.GrantDecision{
		id: {Decision: plexus.DecisionAllow, Verbs: verbs, Purpose: opts.Purpose},
	}}
	status, data, err := a.conn.send(ctx, request{method: http.MethodPut, path: "/grants", session: sess.ID, body: req})
	if err != nil {
		return HeldToken{}, err
	}
	switch status {
	case http.StatusOK:
		var st plexus.ScopedToken
		if err := json.Unmarshal(data, &st); err != nil {
			return HeldToken{}, fmt.Errorf("PUT /grants: decode token: %w", err)
		}
		if d, ok := declined(st.Declined, id); ok {
			return HeldToken{}, deniedError(status, plexus.StateDenied, id, "", fmt.Sprintf("the gateway declined %s: %s", id, d))
		}
		return a.keep(&st, sess.ID, id, need, status)
	case http.StatusAccepted:
		var p plexus.GrantPendingResponse
		if err := json.Unmarshal(data, &p); err != nil {
			return HeldToken{}, fmt.Errorf("PUT /grants: decode pending notice: %w", err)
		}
		if p.PartialToken != nil && p.PartialToken.Token != "" {
			if _, err := a.keep(p.PartialToken, sess.ID, "", nil, status); err != nil {
				return HeldToken{}, err
			}
		}
		if d, ok := declined(p.Declined, id); ok {
			return HeldToken{}, deniedError(status, plexus.StateDenied, id, p.PendingID, fmt.Sprintf("the gateway declined %s: %s", id, d))
		}
		if p.PendingID != "" {
			a.rememberPending(pendingRequest{CapabilityID: id, PendingID: p.PendingID, SessionID: sess.ID,
				Verbs: slices.Clone(verbs), CreatedAt: a.now()})
		}
		if opts.OnPending != nil {
			opts.OnPending(p)
		}
		if !opts.Wait {
			return HeldToken{}, pendingError(p, id, fmt.Sprintf("the grant for %s waits for the owner's approval (pending %s)", id, p.PendingID))
		}
		return a.wait(ctx, sess, id, need, p, opts.WaitTimeout)
	default:
		if status >= 200 && status <= 299 {
			return HeldToken{}, fmt.Errorf("PUT /grants: unexpected HTTP %d", status)
		}
		return HeldToken{}, decodeError(status, data)
	}
}

func declined(ds []plexus.Declined, id string) (string, bool) {
	for _, d := range ds {
		if d.ID == id {
			return d.Reason, true
		}
	}
	return "", false
}

// keep caches st and, when id is set, checks that it covers (id, need).
func (a *Agent) keep(st *plexus.ScopedToken, sessionID, id string, need []plexus.Verb, status int) (HeldToken, error) {
	if st.Token == "" || st.JTI == "" {
		return HeldToken{}, errors.New("grant: the gateway answered a token without token or jti")
	}
	h := heldFromScoped(st, sessionID)
	now := a.now()
	err := a.store.updateCache(func(c *tokenCache) {
		// Drop what can never be used again, so the cache does not grow.
		c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool {
			return !now.Before(t.ExpiresAt) && (t.GrantExpiresAt.IsZero() || !now.Before(t.GrantExpiresAt))
		})
		c.Tokens = append(c.Tokens, h)
	})
	if err != nil {
		return HeldToken{}, err
	}
	if id != "" && !h.Covers(id, need) {
		return HeldToken{}, deniedError(status, "", id, "", fmt.Sprintf("the token granted does not cover %s with %s", id, verbList(need)))
	}
	return h, nil
}

// wait polls GET /grants/status with backoff until the pending decision p
// ends or timeout passes. Once p ends it is forgotten; a wait that times out
// or is interrupted leaves it remembered, to be resumed by the next call.
func (a *Agent) wait(ctx context.Context, sess *cachedSession, id string, need []plexus.Verb, p plexus.GrantPendingResponse, timeout time.Duration) (HeldToken, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	delay := pollFirst
	for {
		d := delay
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return HeldToken{}, pendingError(p, id, fmt.Sprintf("still waiting for the owner after %s (pending %s)", timeout, p.PendingID))
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return HeldToken{}, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, pollMax)

		var st plexus.GrantStatusResponse
		q := url.Values{"pendingId": {p.PendingID}}
		status, err := a.conn.call(ctx, request{method: http.MethodGet, path: "/grants/status", query: q, session: sess.ID}, &st)
		if err != nil {
			return HeldToken{}, err
		}
		switch st.State {
		case plexus.StatePending:
			continue
		case plexus.StateApproved:
			if st.Token != nil && st.Token.Token != "" {
				tok, err := a.keep(st.Token, sess.ID, id, need, status)
				if err == nil || isGatewayError(err) {
					a.forgetPending(id, p.PendingID)
				}
				return tok, err
			}
			// Approved, but the token went elsewhere (another session asked
			// too): the grant now stands, so asking again mints one.
			a.forgetPending(id, p.PendingID)
			return a.grant(ctx, sess, id, need, need, CallOptions{})
		case plexus.StateDenied, plexus.StateExpired, plexus.StateWithdrawn:
			a.forgetPending(id, p.PendingID)
			msg := fmt.Sprintf("the request for %s was %s", id, st.State)
			if st.State == plexus.StateDenied {
				msg = fmt.Sprintf("the owner denied the request for %s", id)
			}
			if st.Reason != "" {
				msg += ": " + st.Reason
			}
			return HeldToken{}, deniedError(status, st.State, id, p.PendingID, msg)
		default:
			return HeldToken{}, fmt.Errorf("GET /grants/status: unknown state %q", st.State)
		}
	}
}

// refresh re-mints tok from its grant (POST /grants/refresh) and replaces it
// in the cache; the old jti is revoked by the gateway.
func (a *Agent) refresh(ctx context.Context, tok HeldToken) (HeldToken, error) {
	var resp plexus.RefreshResponse
	req := request{method: http.MethodPost, path: "/grants/refresh", bearer: tok.Token,
		session: tok.SessionID, body: plexus.RefreshRequest{SessionID: tok.SessionID, JTI: tok.JTI}}
	if _, err := a.conn.call(ctx, req, &resp); err != nil {
		return HeldToken{}, err
	}
	if resp.Token == "" || resp.JTI == "" {
		return HeldToken{}, errors.New("refresh: the gateway answered without token or jti")
	}
	nt := HeldToken{Token: resp.Token, JTI: resp.JTI, Scopes: resp.Scopes, ExpiresAt: resp.ExpiresAt,
		GrantExpiresAt: resp.GrantExpiresAt, SessionID: tok.SessionID}
	err := a.store.updateCache(func(c *tokenCache) {
		c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool { return t.JTI == tok.JTI })
		c.Tokens = append(c.Tokens, nt)
	})
	return nt, err
}

// invoke presents tok on POST /invoke. Every answer of the endpoint is an
// InvokeResponse; an edge in front of it answering the error envelope
// instead is folded into one.
func (a *Agent) invoke(ctx context.Context, tok HeldToken, id string, input map[string]any, key string,
	progress func(plexus.InvokeProgressEvent)) (*plexus.InvokeResponse, int, error) {
	req := request{method: http.MethodPost, path: "/invoke", bearer: tok.Token, timeout: a.conn.invokeTimeout,
		body: plexus.InvokeRequest{ID: id, Input: input, IdempotencyKey: key}}
	if progress != nil {
		req.onEvent = func(typ string, data []byte) {
			var ev plexus.InvokeProgressEvent
			if typ == plexus.EventInvokeProgress && json.Unmarshal(data, &ev) == nil {
				progress(ev)
			}
		}
	}
	status, data, err := a.conn.send(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	var resp plexus.InvokeResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		e := decodeError(status, data)
		return &plexus.InvokeResponse{ID: id, Error: &e.Body}, status, nil
	}
	if resp.ID == "" {
		resp.ID = id
	}
	if !resp.OK && resp.Error == nil {
		resp.Error = &plexus.ErrorBody{Code: plexus.CodeInternalError,
			Message: fmt.Sprintf("the gateway answered ok:false without an error (HTTP %d)", status)}
	}
	return &resp, status, nil
}

// rememberPending records p as the outstanding request for its capability,
// replacing any earlier one. Best effort: a request not remembered is only
// asked again by the next call.
func (a *Agent) rememberPending(p pendingRequest) {
	_ = a.store.updateCache(func(c *tokenCache) {
		c.Pending = slices.DeleteFunc(c.Pending, func(q pendingRequest) bool { return q.CapabilityID == p.CapabilityID })
		c.Pending = append(c.Pending, p)
	})
}

// forgetPending drops the remembered request pendingID for capability id
// (and not a newer one another call may have remembered since).
func (a *Agent) forgetPending(id, pendingID string) {
	_ = a.store.updateCache(func(c *tokenCache) {
		c.Pending = slices.DeleteFunc(c.Pending, func(q pendingRequest) bool {
			return q.CapabilityID == id && q.PendingID == pendingID
		})
	})
}

// forgetRevoked drops the token jti the gateway reported revoked and
// remembers that capability id's grant was revoked (see [RevokedError]).
func (a *Agent) forgetRevoked(jti, id string) error {
	return a.store.updateCache(func(c *tokenCache) {
		c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool { return t.JTI == jti })
		if !slices.Contains(c.Revoked, id) {
			c.Revoked = append(c.Revoked, id)
		}
	})
}

// askedAgain forgets that capability id's grant was revoked: the agent has
// asked for it again, with a purpose.
func (a *Agent) askedAgain(id string) error {
	return a.store.updateCache(func(c *tokenCache) {
		c.Revoked = slices.DeleteFunc(c.Revoked, func(r string) bool { return r == id })
	})
}

func (a *Agent) forgetToken(jti string) {
	// Best effort: a token that stays cached fails again and is dropped then.
	_ = a.store.updateCache(func(c *tokenCache) {
		c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool { return t.JTI == jti })
	})
}

// dropSession forgets the current session (memory and cache), keeping the
// tokens: they die with their own session, which may be another one.
func (a *Agent) dropSession() {
	a.mu.Lock()
	a.sess, a.manifest = nil, nil
	a.mu.Unlock()
	_ = a.store.updateCache(func(c *tokenCache) { c.Session = nil })
}

// forgetSession drops a dead session and every token and pending request
// bound to it.
func (a *Agent) forgetSession(id string) {
	a.mu.Lock()
	if a.sess != nil && a.sess.ID == id {
		a.sess, a.manifest = nil, nil
	}
	a.mu.Unlock()
	_ = a.store.updateCache(func(c *tokenCache) {
		if c.Session != nil && c.Session.ID == id {
			c.Session = nil
		}
		c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool { return t.SessionID == id })
		c.Pending = slices.DeleteFunc(c.Pending, func(p pendingRequest) bool { return p.SessionID == id })
	})
}

func isGatewayError(err error) bool {
	var ce *Error
	return errors.As(err, &ce)
}

func verbList(vs []plexus.Verb) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}
