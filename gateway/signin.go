package gateway

// Sign-in requests of remote MCP servers (OAuth, issue #19). A server that
// wants Plexus to sign in to it becomes an owner decision of kind signin,
// put up by Plexus itself and never by an agent: one per server while it
// waits, journaled, and approved through the same Decide as every other.
// Approving it starts the sign-in (the [SignInStarter]) and keeps the page
// the owner opens to finish it; the tokens never pass through here.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// SignInTTL is how long a sign-in request waits for the owner. Nobody's
// call waits on it (the server's calls answer source_unavailable
// meanwhile); when it expires unanswered, the next time the server asks a
// new request is put up.
const SignInTTL = 30 * 24 * time.Hour

// signInStartTimeout bounds starting an approved sign-in (discovery and
// client registration at the authorization server), not the sign-in
// itself, which waits for the owner's browser.
const signInStartTimeout = time.Minute

// maxScopes caps the scopes of one request; maxScope one scope's length.
const (
	maxScopes = 64
	maxScope  = 200
)

// SignInStarter starts the sign-in the owner approved: the
// authorization-code flow for req.Server, answering the authorization URL
// the owner opens to finish it. req is the request as the owner was shown
// it: the starter starts only a sign-in at its issuer, for its resource,
// within its scopes, and otherwise fails saying why (and files a new
// request showing what it found). ctx bounds the start only; the flow it
// starts outlives it, and its completion is the starter's to journal.
// Calls may come from any goroutine, and for one server while an earlier
// flow is still open.
type SignInStarter interface {
	StartSignIn(ctx context.Context, req plexus.SignInRequest) (authURL string, err error)
}

// RequestSignIn puts req up for the owner as a sign-in decision and
// answers its id. While one is waiting for the same server, that one's id
// is answered and nothing changes, unless req is a widening that asks for
// scopes the waiting one does not add: req then supersedes it (the waiting
// one is withdrawn). Only the daemon calls it, for the sign-in client: no
// edge lets an agent in.
func (g *Gateway) RequestSignIn(ctx context.Context, req plexus.SignInRequest) (string, error) {
	req, err := cleanSignIn(req)
	if err != nil {
		return "", err
	}
	now := g.now()
	var out signInFiled
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		out, err = fileSignIn(tx, req, now)
		return err
	})
	if err != nil {
		return "", plexus.AsError(err)
	}
	g.touch(out.touched...)
	return out.id, nil
}

// signInFiled is what filing a sign-in request committed: the decision
// that stands for it and the decisions put up or withdrawn.
type signInFiled struct {
	id      string
	touched []string
}

// fileSignIn files req inside tx: the decision already waiting for its
// server when req adds nothing to it, else a new decision (with its
// signin.requested row) that withdraws the one it supersedes.
func fileSignIn(tx plexus.StateTx, req plexus.SignInRequest, now time.Time) (signInFiled, error) {
	list, err := tx.PendingList(plexus.StatePending)
	if err != nil {
		return signInFiled{}, err
	}
	for _, p := range list {
		if p.SignIn == nil || p.SignIn.Server != req.Server {
			continue
		}
		if !supersedes(req, p.SignIn.SignInRequest) {
			return signInFiled{id: p.ID}, nil
		}
	}
	p := signInPending(req, now)
	withdrawn, err := withdrawSignIns(tx, list, req.Server, "superseded by "+p.ID+", which asks for more scopes", now)
	if err != nil {
		return signInFiled{}, err
	}
	if err := tx.PutPending(p); err != nil {
		return signInFiled{}, err
	}
	if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorSystem, ActionType: "signin.requested",
		Target: p.ID, Payload: signInPayload(req, map[string]any{"reason": req.Reason})}); err != nil {
		return signInFiled{}, err
	}
	return signInFiled{id: p.ID, touched: append(withdrawn, p.ID)}, nil
}

// WithdrawSignIn withdraws the sign-in request waiting for server, if
// any, with why (journaled as signin.withdrawn): the owner signed in
// another way (`plexus mcp login`), or the server left mcp.json. No
// request waiting is not an error.
func (g *Gateway) WithdrawSignIn(ctx context.Context, server, why string) error {
	now := g.now()
	var withdrawn []string
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		list, err := tx.PendingList(plexus.StatePending)
		if err != nil {
			return err
		}
		withdrawn, err = withdrawSignIns(tx, list, server, auth.CleanPurpose(why), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("withdraw the sign-in request of %s: %w", server, err)
	}
	g.touch(withdrawn...)
	return nil
}

// withdrawSignIns withdraws, inside tx, each sign-in request of list
// waiting for server, with why and its signin.withdrawn row, and answers
// their ids.
func withdrawSignIns(tx plexus.StateTx, list []plexus.Pending, server, why string, now time.Time) ([]string, error) {
	var out []string
	for _, p := range list {
		if p.SignIn == nil || p.SignIn.Server != server || p.State != plexus.StatePending {
			continue
		}
		p.State, p.DecidedAt, p.DecidedBy, p.Via, p.Reason = plexus.StateWithdrawn, &now, plexus.ActorSystem, plexus.ViaSystem, why
		if err := tx.PutPending(&p); err != nil {
			return nil, err
		}
		if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorSystem, ActionType: "signin.withdrawn",
			Target: p.ID, Payload: signInPayload(p.SignIn.SignInRequest, map[string]any{"reason": why})}); err != nil {
			return nil, err
		}
		out = append(out, p.ID)
	}
	return out, nil
}

// supersedes reports whether req replaces the waiting request old: it is
// a widening that adds a scope old does not add.
func supersedes(req, old plexus.SignInRequest) bool {
	for _, s := range req.Widening {
		if !slices.Contains(old.Widening, s) {
			return true
		}
	}
	return false
}

// signInPending is the decision that puts req up for the owner.
func signInPending(req plexus.SignInRequest, now time.Time) *plexus.Pending {
	summary := fmt.Sprintf("The MCP server %s, one of your own sources, asks Plexus to sign in to it at %s. "+
		"Approving starts the sign-in: you finish it in your browser, and the tokens stay with Plexus, never with an agent.",
		req.Server, orUnknown(req.Issuer))
	line := fmt.Sprintf("%s needs you to sign in to it", req.Server)
	if len(req.Widening) > 0 {
		summary = fmt.Sprintf("The MCP server %s, one of your own sources, asks for more than you approved before: %s. "+
			"Approving starts a new sign-in asking for them.", req.Server, strings.Join(req.Widening, ", "))
		line = fmt.Sprintf("%s asks for more scopes: %s", req.Server, strings.Join(req.Widening, ", "))
	}
	return &plexus.Pending{ID: auth.NewID("pend_"), Kind: plexus.PendingSignIn, State: plexus.StatePending,
		CreatedAt: now, ExpiresAt: now.Add(SignInTTL), TraceID: auth.NewTraceID(), Items: []plexus.PendingItem{},
		SignIn:    &plexus.SignInDecision{SignInRequest: req},
		Narration: []plexus.PendingNarration{{ID: "mcp:" + req.Server, Summary: summary, NotificationLine: line}}}
}

func orUnknown(issuer string) string {
	if issuer == "" {
		return "an authorization server not discovered yet"
	}
	return issuer
}

// signInPayload is a journal row's account of req plus extra: what was
// asked, never a secret (a request carries none).
func signInPayload(req plexus.SignInRequest, extra map[string]any) map[string]any {
	out := map[string]any{"server": req.Server, "resource": req.Resource, "issuer": req.Issuer, "scopes": nonNil(req.Scopes)}
	if len(req.Widening) > 0 {
		out["widening"] = req.Widening
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// cleanSignIn checks req and cleans its prose. A server name, resource,
// issuer or scope that is not what it claims to be is refused, not shown:
// the owner reads these to decide.
func cleanSignIn(req plexus.SignInRequest) (plexus.SignInRequest, error) {
	bad := func(format string, args ...any) (plexus.SignInRequest, error) {
		return plexus.SignInRequest{}, plexus.Errorf(plexus.CodeInvalidRequest, "sign-in request: "+format, args...)
	}
	if !validServerName(req.Server) {
		return bad("server %q is not an mcp.json entry name", req.Server)
	}
	if err := checkOAuthURL(req.Resource); err != nil {
		return bad("resource: %v", err)
	}
	if req.Issuer != "" {
		if err := checkOAuthURL(req.Issuer); err != nil {
			return bad("issuer: %v", err)
		}
	}
	if len(req.Scopes)+len(req.Widening) > maxScopes {
		return bad("at most %d scopes", maxScopes)
	}
	for _, s := range append(slices.Clone(req.Scopes), req.Widening...) {
		if !validScope(s) {
			return bad("scope %q is not an OAuth scope token", s)
		}
	}
	req.Scopes, req.Widening = sortedSet(req.Scopes), sortedSet(req.Widening)
	req.Reason = auth.CleanPurpose(req.Reason)
	return req, nil
}

// validServerName: an mcp.json entry name becomes the source mcp:<name>
// and part of entry ids; letters, digits, '-', '_' and '.' cover every
// name a server is added under.
func validServerName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.')) {
			return false
		}
	}
	return true
}

// validScope is RFC 6749's scope-token: printable ASCII but space, '"'
// and '\'.
func validScope(s string) bool {
	if s == "" || len(s) > maxScope {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// checkOAuthURL accepts an absolute https URL, or http to a loopback
// host (the MCP authorization spec's rule for what a client talks to),
// with no user info: the owner is shown it to decide, and opens it.
func checkOAuthURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q carries user info", s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == '<' || r == '>' || r == '"' || r == '`' || r > unicode.MaxASCII {
			return fmt.Errorf("%q holds a character a URL spells escaped", s)
		}
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q is neither https nor http to loopback", s)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sortedSet(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// decideSignIn applies the owner's answer to a sign-in request, inside
// Decide's transaction: the state and its row, never an event (no agent
// asked, and none may observe it). It answers the server whose sign-in
// starts after the commit ("" for none).
func decideSignIn(tx plexus.StateTx, p *plexus.Pending, d plexus.Decision, actor string) (string, error) {
	s := p.SignIn
	if s == nil {
		return "", plexus.Errorf(plexus.CodeConflict, "decision %s carries no sign-in request", p.ID)
	}
	if d.Approve && (len(d.Items) > 0 || len(d.Verbs) > 0 || len(d.Capabilities) > 0 || d.TrustWindow != nil) {
		return "", plexus.Errorf(plexus.CodeInvalidRequest, "a sign-in request is approved or denied as a whole")
	}
	switch {
	case d.Approve:
		p.State = plexus.StateApproved
	case d.Withdraw:
		p.State = plexus.StateWithdrawn
	default:
		p.State = plexus.StateDenied
	}
	if err := tx.PutPending(p); err != nil {
		return "", err
	}
	if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: actor, ActionType: "signin." + p.State, Target: p.ID,
		Payload: signInPayload(s.SignInRequest, map[string]any{"decidedBy": d.DecidedBy, "via": d.Via, "reason": p.Reason})}); err != nil {
		return "", err
	}
	if p.State == plexus.StateApproved {
		return s.Server, nil
	}
	return "", nil
}

// startSignIn starts the approved sign-in p and keeps, on the decision,
// the URL the owner opens or why it could not start (journaled as
// signin.failed). The approval stands either way: `plexus mcp login`
// starts the same sign-in again. It answers the decision as kept.
func (g *Gateway) startSignIn(ctx context.Context, p plexus.Pending) plexus.Pending {
	authURL, err := g.callStarter(ctx, p.SignIn.SignInRequest)
	if err == nil {
		if err = checkOAuthURL(authURL); err != nil {
			err = fmt.Errorf("the authorization URL: %w", err)
		}
	}
	var failure string
	if err != nil {
		failure = auth.CleanPurpose(err.Error())
		authURL = ""
	}
	out := p
	// The approval is committed: what came of it is kept even when the
	// channel that approved has gone away meanwhile.
	err = g.update(context.WithoutCancel(ctx), true, func(tx plexus.StateTx) error {
		cur, err := tx.Pending(p.ID)
		if err != nil {
			return err
		}
		s := *cur.SignIn
		s.AuthURL, s.StartError = authURL, failure
		cur.SignIn = &s
		if err := tx.PutPending(cur); err != nil {
			return err
		}
		out = *cur
		if failure == "" {
			return nil
		}
		return tx.Record(&plexus.Activity{TraceID: cur.TraceID, Actor: plexus.ActorSystem, ActionType: "signin.failed", Target: cur.ID,
			Payload: signInPayload(s.SignInRequest, map[string]any{"error": failure})})
	})
	if err != nil {
		g.log.Error("keep the start of an approved sign-in", "pending", p.ID, "server", p.SignIn.Server, "err", err)
	}
	return out
}

// callStarter starts the approved req's sign-in through the starter the
// daemon wired, bounded by signInStartTimeout.
func (g *Gateway) callStarter(ctx context.Context, req plexus.SignInRequest) (string, error) {
	server := req.Server
	if g.d.SignIn == nil {
		return "", fmt.Errorf("this daemon cannot start a sign-in; run plexus mcp login %s", server)
	}
	ctx, cancel := context.WithTimeout(ctx, signInStartTimeout)
	defer cancel()
	u, err := g.d.SignIn.StartSignIn(ctx, req)
	if err != nil {
		return "", fmt.Errorf("start the sign-in to %s: %w", server, err)
	}
	return u, nil
}
