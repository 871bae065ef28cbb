package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/internal/jsonenc"
)

// Invoke runs the pipeline in the spec's order: token → jti and session →
// rate limit → scope (and constraint) → lightweight input validation →
// the invoke.started row (started.go) → Transport.dispatch → audit →
// InvokeResponse. (The Host/Origin guard ran at the edge.) It always answers
// an InvokeResponse: a denial is OK false with an error code, never a Go
// error.
//
// The rate limit is applied as soon as the token's signature names its
// agent, before the token_expired and session-mismatch denials: every
// audited denial writes a journal row, and the limit is what bounds their
// number (its own denials coalesce), so an agent looping on an expired token
// cannot write a row per call.
func (g *Gateway) Invoke(ctx context.Context, c Credentials, req plexus.InvokeRequest) plexus.InvokeResponse {
	if c.Bearer == "" {
		return deny(req.ID, plexus.Errorf(plexus.CodeGrantRequired,
			"no token: request a grant with PUT /grants, then send Authorization: Bearer <token>"), "")
	}
	claims, err := g.verify(c.Bearer)
	var expired *plexus.Error
	if err != nil {
		expired = plexus.AsError(err)
		if expired.Code != plexus.CodeTokenExpired {
			return deny(req.ID, expired, "") // a malformed or forged token is an edge denial: nothing to attribute
		}
		if claims, err = g.d.Signer.VerifyAllowExpired(c.Bearer, 365*24*time.Hour); err != nil {
			return deny(req.ID, expired, "")
		}
	}
	ic := plexus.InvokeContext{JTI: claims.ID, SessionID: claims.SessionID, AgentID: claims.Subject}
	if g.d.Limiter != nil && !g.d.Limiter.Allow(claims.Subject) {
		return g.denyAudited(ctx, req, ic, plexus.Errorf(plexus.CodeRateLimited, "too many calls from %s; back off", claims.Subject))
	}
	if expired != nil {
		return g.denyAudited(ctx, req, ic, expired)
	}
	ic.Scopes = claims.Scopes
	if c.SessionID != "" && c.SessionID != claims.SessionID {
		// Credentials that disagree are refused rather than guessed at, as
		// refresh and PUT /grants do: a token presented beside another
		// session's header (another agent's, say) acts for nobody.
		return g.denyAudited(ctx, req, ic, plexus.Errorf(plexus.CodeSessionExpired,
			"the token belongs to another session than the %s header names", plexus.SessionHeader))
	}
	return g.pipeline(ctx, req, ic, false)
}

// invokeMember is the re-entrant pipeline a workflow transport fans out
// through: the same checks and audit as a top-level call, with the workflow's
// synthesized member scopes honoured.
func (g *Gateway) invokeMember(ctx context.Context, req plexus.InvokeRequest, ic plexus.InvokeContext) plexus.InvokeResponse {
	return g.pipeline(ctx, req, ic, true)
}

// pipeline runs one call through its steps: [Gateway.admit] reads what the
// journal knows of the token, session and grant; a used once grant is
// answered as a retry or refused ([Gateway.retryOfUsed]); the input is
// validated; [Gateway.begin] commits the invoke.started row (consuming a once
// grant) before anything can change; [Gateway.dispatch] calls the transport;
// and [outcome] computes the response and its outcome row, which
// [Gateway.finish] commits before the response leaves.
func (g *Gateway) pipeline(ctx context.Context, req plexus.InvokeRequest, ic plexus.InvokeContext, member bool) plexus.InvokeResponse {
	start := time.Now()
	now := g.now()

	entry, known := g.d.Registry.Entry(req.ID)
	ad, err := g.admit(cachedReader{ctx: ctx, g: g}, req, ic, entry, known, member, now)
	if err != nil {
		return deny(req.ID, plexus.WrapError(plexus.CodeInternalError, err, "could not check the token"), "")
	}
	if ic.TraceID == "" && ad.rec != nil {
		ic.TraceID = ad.rec.TraceID // denials join the token's story too
	}
	if ad.denial != nil {
		return g.denyAudited(ctx, req, ic, ad.denial)
	}
	mutating := mutates(entry.Grants)
	idemKey, idemHash := g.idempotencyScope(req, ic, mutating)
	if ad.usedOnce {
		return g.retryOfUsed(ctx, req, ic, ad.backing, idemKey, idemHash, now)
	}
	if verr := g.val.validate(entry, req.Input); verr != nil {
		verr.CapabilityID = req.ID
		return g.denyAudited(ctx, req, ic, verr)
	}
	if idemKey != "" {
		if prev, ok := g.idem.get(idemKey, now); ok {
			return prev
		}
	}

	// Nothing that can change anything is dispatched without its
	// invoke.started row committed (with the once grant's consumption, for
	// a once grant): a journal that cannot take the row refuses the call
	// before it has any effect (started.go).
	payload := g.invokePayload(entry, req, ic, idemHash, member)
	once := ad.once()
	var st started
	if mutating || once {
		st, err = g.begin(ctx, req.ID, ic, ad.backing, once, payload, idemHash, now)
		if err != nil {
			return g.auditUnavailable(req.ID, err)
		}
		if st.refusal != nil {
			return g.denyAudited(ctx, req, ic, st.refusal)
		}
		g.touch(st.decision)
	}

	res := g.dispatch(ctx, entry, req, ic)
	resp, row := outcome(req, ic, res, payload, time.Since(start), st.row)
	return g.finish(ctx, req.ID, resp, row, st.row, idemKey, now)
}

// retryOfUsed answers a call on a once grant that has served its call. A
// retry of that very call with its idempotencyKey (the client lost the
// answer) gets the answer again, or what the journal knows of it; anything
// else is a second use.
func (g *Gateway) retryOfUsed(ctx context.Context, req plexus.InvokeRequest, ic plexus.InvokeContext, backing *plexus.Grant, idemKey, idemHash string, now time.Time) plexus.InvokeResponse {
	if idemKey != "" {
		if prev, ok := g.idem.get(idemKey, now); ok {
			return prev
		}
		if refusal, err := g.priorCall(ctx, idemHash, now); err != nil {
			return g.auditUnavailable(req.ID, err)
		} else if refusal != nil {
			return g.denyAudited(ctx, req, ic, refusal)
		}
	}
	return g.denyAudited(ctx, req, ic, plexus.Errorf(plexus.CodeGrantRequired,
		"the once grant for %s was already used; request it again", backing.CapabilityID))
}

// mutates reports whether a capability requiring verbs can change
// something (a write or execute verb): its calls get a started row and
// idempotency.
func mutates(verbs []plexus.Verb) bool {
	for _, v := range verbs {
		if v.Mutating() {
			return true
		}
	}
	return false
}

// outcome computes what a dispatched call answers and the outcome row that
// must be committed before the answer leaves: invoke.ok or invoke.failed,
// with the call's audit payload (completed in place with its duration, its
// started row's id and its error code). It performs no I/O.
func outcome(req plexus.InvokeRequest, ic plexus.InvokeContext, res plexus.TransportResult, payload map[string]any,
	elapsed time.Duration, startedRow *plexus.Activity) (plexus.InvokeResponse, *plexus.Activity) {
	resp := plexus.InvokeResponse{ID: req.ID, OK: res.OK, MCPResult: res.MCPResult}
	if res.OK {
		resp.Output = res.Data
	} else {
		res.Error.CapabilityID = req.ID
		resp.Error = res.Error.Body()
		if len(res.MCPResult) == 0 {
			resp.Output = nil
		}
	}
	payload["durationMs"] = elapsed.Milliseconds()
	if startedRow != nil {
		payload["startedId"] = startedRow.AuditID()
	}
	action := plexus.ActionInvokeOK
	if !res.OK {
		action = plexus.ActionInvokeFailed
		payload["errorCode"] = string(res.Error.Code)
	}
	row := &plexus.Activity{TraceID: ic.TraceID, Actor: ic.AgentID, AgentID: ic.AgentID, ActionType: action, Target: req.ID, Payload: payload}
	return resp, row
}

// finish commits a dispatched call's outcome row and releases its answer,
// remembered for its idempotencyKey. The row is written even when the
// caller has gone away meanwhile (a streamed /invoke closed mid-call), since
// what the call did, or was stopped from doing, happened all the same; when
// it cannot be written the answer is withheld ([Gateway.outcomeUnrecorded]).
func (g *Gateway) finish(ctx context.Context, id string, resp plexus.InvokeResponse, row, startedRow *plexus.Activity, idemKey string, now time.Time) plexus.InvokeResponse {
	if err := g.record(context.WithoutCancel(ctx), false, row); err != nil {
		return g.outcomeUnrecorded(id, startedRow, row.ActionType, err)
	}
	resp.AuditID = row.AuditID()
	if idemKey != "" {
		g.idem.put(idemKey, resp, now)
	}
	return resp
}

// dispatch hands the call to its transport; a failure always carries an
// error.
func (g *Gateway) dispatch(ctx context.Context, entry plexus.Entry, req plexus.InvokeRequest, ic plexus.InvokeContext) plexus.TransportResult {
	tr, ok := g.d.Registry.Transport(entry.Transport)
	if !ok {
		return plexus.TransportResult{Error: plexus.Errorf(plexus.CodeSourceUnavailable, "no transport %q is installed", entry.Transport)}
	}
	input := req.Input
	if input == nil {
		input = map[string]any{}
	}
	rl := g.newRelay(ctx, req.ID, ic)
	dic := ic
	dic.IdempotencyKey = req.IdempotencyKey
	res := tr.Dispatch(ctx, entry, input, plexus.DispatchContext{Invoke: dic, InvokeByID: g.member, Progress: rl.report})
	rl.end()
	if !res.OK && res.Error == nil {
		res.Error = plexus.Errorf(plexus.CodeTransportError, "the transport reported a failure without detail")
	}
	return res
}

// pathResolver is what a transport offers when the paths its calls name
// are files in a folder it confines them to (the portal): the path p
// reaches inside entry's folder, symbolic links followed within it. A
// path-prefix constraint is checked on that path too, so that a link inside
// an allowed prefix cannot reach the rest of the folder. It is called only
// for a scope that has such a constraint, may touch the file system, and
// must be safe for concurrent use; an error fails the constraint closed.
type pathResolver interface {
	ResolvePath(entry plexus.Entry, p string) (string, error)
}

// resolver returns how entry's transport resolves paths, or nil when it
// does not.
func (g *Gateway) resolver(entry plexus.Entry) auth.ResolvePath {
	tr, ok := g.d.Registry.Transport(entry.Transport)
	if !ok {
		return nil
	}
	pr, ok := tr.(pathResolver)
	if !ok {
		return nil
	}
	return func(p string) (string, error) { return pr.ResolvePath(entry, p) }
}

// covering finds the scope covering a call. Synthesized member scopes count
// only on re-entrant dispatch from their workflow: an agent cannot call a
// workflow's member directly on the strength of the workflow grant. The
// scopes are copied only when some must be left out, and the transport's
// path resolver is looked up only when a scope has a constraint to check.
func (g *Gateway) covering(scopes []plexus.TokenScope, entry plexus.Entry, input map[string]any, member bool) *plexus.TokenScope {
	usable := scopes
	if !member && slices.ContainsFunc(scopes, synthesized) {
		usable = slices.DeleteFunc(slices.Clone(scopes), synthesized)
	}
	var resolve auth.ResolvePath
	if slices.ContainsFunc(usable, func(s plexus.TokenScope) bool { return s.Constraint != nil }) {
		resolve = g.resolver(entry)
	}
	s, ok := auth.CoveringResolved(usable, entry, input, resolve)
	if !ok {
		return nil
	}
	return s
}

func synthesized(s plexus.TokenScope) bool { return s.SynthesizedFor != "" }

// invokePayload is the redaction-safe audit detail of a call, shared by its
// started and its outcome rows: ids, verbs, a keyed hash of the input (so two
// identical calls can be matched without the input ever being stored) and
// of its idempotency scope.
func (g *Gateway) invokePayload(entry plexus.Entry, req plexus.InvokeRequest, ic plexus.InvokeContext, idemHash string, member bool) map[string]any {
	p := map[string]any{"jti": ic.JTI, "sessionId": ic.SessionID, "verbs": entry.Grants}
	if len(req.Input) > 0 {
		p["inputHash"] = g.inputHash(req.Input)
	}
	if req.IdempotencyKey != "" {
		p["idempotent"] = true
	}
	if idemHash != "" {
		p["idemHash"] = idemHash
	}
	if member {
		p["member"] = true
	}
	return p
}

// inputHash is the keyed hash of input's JSON as json.Marshal writes it
// (map keys sorted: a stable form), encoded into a recycled buffer. An input
// decoded from JSON always encodes again; should one not, the row says so.
func (g *Gateway) inputHash(input map[string]any) string {
	bp, _ := g.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b, ok := jsonenc.Append((*bp)[:0], input, true)
	if !ok {
		var err error
		if b, err = json.Marshal(input); err != nil {
			return "unencodable: " + err.Error()
		}
	}
	n := len(b)
	b = g.d.Hasher.AppendHash(b, b)
	h := hex.EncodeToString(b[n : n+16])
	if cap(b) <= 64<<10 { // the pool should not pin a huge input's buffer
		*bp = b[:0]
		g.scratch.Put(bp)
	}
	return h
}

// denyAudited journals a pipeline denial and returns it with its audit id.
// An agent over its rate can repeat rate_limited as fast as it can send, so
// those denials coalesce per agent and window: the answer carries the id of
// the row that opened the window, and a summary row counts the rest.
func (g *Gateway) denyAudited(ctx context.Context, req plexus.InvokeRequest, ic plexus.InvokeContext, e *plexus.Error) plexus.InvokeResponse {
	e.CapabilityID = req.ID
	a := &plexus.Activity{TraceID: ic.TraceID, Actor: actorOr(ic.AgentID), AgentID: ic.AgentID, ActionType: "invoke.denied",
		Target: req.ID, Payload: map[string]any{"errorCode": string(e.Code), "reason": e.Message, "jti": ic.JTI, "sessionId": ic.SessionID}}
	var auditID string
	var err error
	if e.Code == plexus.CodeRateLimited {
		auditID, err = g.journalDenial(ctx, denialKey{action: a.ActionType, subject: ic.AgentID, code: string(e.Code)}, a)
	} else if err = g.record(ctx, false, a); err == nil {
		auditID = a.AuditID()
	}
	if err != nil {
		g.JournalFailed(a.ActionType+" "+req.ID, err)
		return deny(req.ID, e, "")
	}
	return deny(req.ID, e, auditID)
}

func deny(id string, e *plexus.Error, auditID string) plexus.InvokeResponse {
	return plexus.InvokeResponse{ID: id, OK: false, Error: e.Body(), AuditID: auditID}
}

func actorOr(agent string) string {
	if agent == "" {
		return plexus.ActorSystem
	}
	return agent
}
