package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// tokenMargin is how long before its expiry a held token is no longer
// presented: asking again (a standing grant mints at once) beats a call
// refused mid-flight.
const tokenMargin = 10 * time.Second

// callTool answers tools/call: the entry the tool name shows (in search
// mode, the search tools), a token for it (asking for a grant, and waiting
// for the owner, when the link holds none), then the call through the
// gateway. A call the gateway refuses or that fails is a tool error
// (isError) carrying the Plexus error code; a tool name outside the
// agent's view is a protocol error, and nothing runs.
func (s *Server) callTool(ctx context.Context, l *link, req *mcp.CallToolRequest) (mcp.Result, error) {
	c, err := s.catalog(ctx, l)
	if err != nil {
		return nil, err
	}
	var input map[string]any
	if args := req.Params.Arguments; len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &input); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments must be a JSON object"}
		}
	}
	if c.search {
		return s.searchCall(ctx, l, c, req, input)
	}
	entry, err := c.tool(req.Params.Name)
	if err != nil {
		return nil, err
	}
	resp, answer, err := s.run(ctx, l, entry, what{kind: "the MCP tool", name: req.Params.Name}, input, newProgress(ctx, req))
	if err != nil {
		return nil, err
	}
	if answer != nil {
		return answer, nil
	}
	return s.toolResult(req, entry, resp), nil
}

// what names a call in the purpose of the grant it asks for ("the MCP tool
// x"); the text is built only when a grant is asked.
type what struct{ kind, name, by string }

func (w what) String() string {
	if w.by != "" {
		return w.kind + " " + w.name + " (by " + w.by + ")"
	}
	return w.kind + " " + w.name
}

// run makes one call of entry (what names it in a grant's purpose): a
// token for it, then the call through the gateway, asking once more when a
// held token turns out stale. answer is set instead of a response when the
// call ends before running (denied, the wait ended undecided, refused); err
// when the host cancelled or the session ended. Every primitive's read or
// get goes this way.
func (s *Server) run(ctx context.Context, l *link, entry plexus.Entry, what what, input map[string]any, p *progress) (plexus.InvokeResponse, *mcp.CallToolResult, error) {
	for retried := false; ; retried = true {
		var w waited
		tok, answer, err := s.token(ctx, l, entry, what, p, &w)
		if answer == nil && ctx.Err() != nil && w.pendingID != "" {
			// The caller went while the call waited for the owner, or as
			// the owner decided: the call will not run for no one
			// (callers.go), and the journal says so.
			s.abandoned(ctx, l, entry, w, err == nil)
			return plexus.InvokeResponse{}, nil, context.Cause(ctx)
		}
		if err != nil || answer != nil {
			return plexus.InvokeResponse{}, answer, err
		}
		if ctx.Err() != nil {
			// The caller went before the call ran (callers.go).
			return plexus.InvokeResponse{}, nil, context.Cause(ctx)
		}
		// What the server behind the call asks meanwhile goes to this host.
		rctx := plexus.WithRelay(ctx, newHostRelay(ctx, p, l.client, entry.Source))
		resp := s.b.Invoke.InvokeStream(rctx, gateway.Credentials{Bearer: tok.Token, SessionID: l.session},
			plexus.InvokeRequest{ID: entry.ID, Input: input}, p.relay)
		if err := missingCapability(resp); err != nil {
			return resp, nil, err // the server needs what the host did not declare
		}
		if executes(entry) || !resp.OK && resp.Error != nil && stale(resp.Error.Code) {
			l.dropToken(entry.ID, tok.JTI)
		}
		if !resp.OK && resp.Error != nil && stale(resp.Error.Code) && !retried {
			continue // a held token gone stale: ask once more
		}
		if !resp.OK && resp.Error != nil && resp.Error.Code == plexus.CodeSessionExpired {
			s.links.forget(l)
		}
		return resp, nil, nil
	}
}

// stale reports whether a call failed only because the token it presented
// no longer serves (expired, revoked, its grant gone or narrowed).
func stale(c plexus.ErrorCode) bool {
	return c == plexus.CodeTokenExpired || c == plexus.CodeTokenRevoked || c == plexus.CodeGrantRequired
}

// executes reports whether a call of e needs execute, which is never
// standing: its token is used once and never kept, so each call asks.
func executes(e plexus.Entry) bool { return slices.Contains(requiredVerbs(e), plexus.VerbExecute) }

// token is a token covering a call of entry: one the link holds, or one
// granted now. answer is set instead when the call ends here (denied, or
// the wait for the owner ended undecided); err when the host cancelled or
// the session ended. w notes the decision it waited on, if it waited.
func (s *Server) token(ctx context.Context, l *link, entry plexus.Entry, what what, p *progress, w *waited) (plexus.ScopedToken, *mcp.CallToolResult, error) {
	if tok, ok := l.heldToken(entry.ID, s.opts.Clock().Add(tokenMargin)); ok {
		return tok, nil, nil
	}
	if pid, ok := l.pendingFor(entry.ID); ok {
		// An earlier call left this decision undecided: wait on it rather
		// than ask the owner twice.
		w.pendingID, w.since = pid, s.opts.Clock()
		return s.await(ctx, l, entry, pid, p)
	}
	purpose := fmt.Sprintf("%s calls %s", orElse(l.client, "an MCP host"), what)
	st, pend, err := s.b.Grants.RequestGrants(ctx, l.creds(), plexus.GrantRequest{SessionID: l.session,
		Grants: map[string]plexus.GrantDecision{entry.ID: {Decision: plexus.DecisionAllow, Verbs: requiredVerbs(entry), Purpose: purpose}}})
	switch {
	case err != nil && plexus.CodeOf(err) == plexus.CodeSessionExpired:
		return plexus.ScopedToken{}, nil, s.gatewayError(l, err)
	case err != nil:
		return plexus.ScopedToken{}, errorResult(plexus.AsError(err).Body(), entry.ID), nil
	case pend != nil && declinedReason(pend.Declined, entry.ID) != "":
		return plexus.ScopedToken{}, deniedResult(entry.ID, declinedReason(pend.Declined, entry.ID)), nil
	case pend != nil:
		l.rememberPending(entry.ID, pend.PendingID)
		w.pendingID, w.since = pend.PendingID, s.opts.Clock()
		return s.await(ctx, l, entry, pend.PendingID, p)
	case declinedReason(st.Declined, entry.ID) != "":
		return plexus.ScopedToken{}, deniedResult(entry.ID, declinedReason(st.Declined, entry.ID)), nil
	}
	return s.keep(l, entry, *st)
}

// waited is the owner's decision a call waited on, and since when.
type waited struct {
	pendingID string
	since     time.Time
}

// abandoned journals the call of entry that waited on w and will not run,
// its caller gone (decided: as the owner decided; otherwise during the
// wait). A row that cannot be written is logged: the caller is gone, and
// nothing ran.
func (s *Server) abandoned(ctx context.Context, l *link, entry plexus.Entry, w waited, decided bool) {
	reason := "the caller went while the call waited for the owner's decision; the call did not run"
	if decided {
		reason = "the caller went as the owner decided; the call did not run"
	}
	err := s.b.Grants.CallAbandoned(context.WithoutCancel(ctx), l.creds(), gateway.AbandonedCall{ID: entry.ID,
		Verbs: requiredVerbs(entry), PendingID: w.pendingID, Waited: s.opts.Clock().Sub(w.since), Reason: reason})
	if err != nil {
		s.log.Warn("a call whose caller went was not journaled", "capability", entry.ID, "err", err)
	}
}

// keep holds st for the link's next calls (unless it is for execute) and
// checks it covers entry.
func (s *Server) keep(l *link, entry plexus.Entry, st plexus.ScopedToken) (plexus.ScopedToken, *mcp.CallToolResult, error) {
	if !covers(st, entry.ID, requiredVerbs(entry)) {
		return plexus.ScopedToken{}, errorResult(&plexus.ErrorBody{Code: plexus.CodeGrantRequired,
			Message: "the token granted does not cover " + entry.ID + " with the verbs a call needs"}, entry.ID), nil
	}
	if !executes(entry) {
		l.keepToken(entry.ID, st)
	}
	return st, nil, nil
}

func covers(st plexus.ScopedToken, id string, need []plexus.Verb) bool {
	for _, sc := range st.Scopes {
		if sc.ID == id && plexus.CoversVerbs(sc.Verbs, need) {
			return true
		}
	}
	return false
}

func declinedReason(ds []plexus.Declined, id string) string {
	for _, d := range ds {
		if d.ID == id {
			return orElse(d.Reason, "declined")
		}
	}
	return ""
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (l *link) heldToken(id string, until time.Time) (plexus.ScopedToken, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tok, ok := l.tokens[id]
	return tok, ok && until.Before(tok.ExpiresAt)
}

func (l *link) keepToken(id string, tok plexus.ScopedToken) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens[id] = tok
}

// dropToken forgets the token jti held for id, unless another call has
// replaced it meanwhile.
func (l *link) dropToken(id, jti string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tokens[id].JTI == jti {
		delete(l.tokens, id)
	}
}

func (l *link) pendingFor(id string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pid, ok := l.pending[id]
	return pid, ok
}

func (l *link) rememberPending(id, pendingID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[id] = pendingID
}

func (l *link) forgetPending(id, pendingID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[id] == pendingID {
		delete(l.pending, id)
	}
}
