package gateway

import (
	"context"
	"encoding/hex"
	"errors"
	"maps"
	"time"

	"github.com/plexus-gw/plexus"
)

// Fail closed before dispatch.
//
// The invoke.started row of a call that can change something (a write or
// execute verb), or that consumes a once grant, is committed before its
// transport is called, so a journal that cannot take rows (another process
// holding journal.db's write lock past the busy timeout, a full disk)
// refuses the call before it has any effect. A read has no effect to
// protect: it gets no started row (a second commit would double a read's
// journal cost), and its result, like every call's, is released only once
// its outcome row is written. For a call made with an idempotencyKey the
// started row is also its durable record: a retry with the same key whose
// call the journal already holds is never dispatched again, whether the
// daemon restarted since or the first call's outcome could not be written. The started row
// of a standing grant's call rides the group commit like every outcome row
// (no fsync of its own); a once grant's rides the durable transaction that
// consumes the grant.

// started is what the pre-dispatch transaction decided.
type started struct {
	row      *plexus.Activity // the committed invoke.started row
	refusal  *plexus.Error    // set when the call must not be dispatched
	decision string           // the consumed once grant's decision, to touch
}

// idempotencyScope names the call for idempotency: the in-memory key of its
// remembered response, and the keyed hash the journal knows it by. Only
// side-effecting calls with a key have one. The scope is the agent (not the
// token), so a retry after a refresh, or after a restart that outlived the
// token, is still the same call.
func (g *Gateway) idempotencyScope(req plexus.InvokeRequest, ic plexus.InvokeContext, mutating bool) (key, hash string) {
	if req.IdempotencyKey == "" || !mutating {
		return "", ""
	}
	key = ic.AgentID + "\x00" + req.ID + "\x00" + req.IdempotencyKey
	sum := g.d.Hasher.Hash("idempotency\x00" + key)
	return key, hex.EncodeToString(sum[:16])
}

// begin commits the call's invoke.started row, unless the journal already
// holds a call with its idempotency hash or its once grant is already used:
// then st.refusal says why nothing runs. An error means the journal could
// not be written or read, and nothing may run either.
func (g *Gateway) begin(ctx context.Context, id string, ic plexus.InvokeContext, backing *plexus.Grant, once bool, payload map[string]any, idemHash string, now time.Time) (st started, err error) {
	row := &plexus.Activity{TraceID: ic.TraceID, Actor: ic.AgentID, AgentID: ic.AgentID,
		ActionType: plexus.ActionInvokeStarted, Target: id, Payload: maps.Clone(payload)}
	fn := func(tx plexus.StateTx) error {
		st = started{}
		if refusal, err := repeated(tx, idemHash, now); err != nil || refusal != nil {
			st.refusal = refusal
			return err
		}
		if once {
			cur, err := tx.Grant(backing.AgentID, backing.CapabilityID)
			if err != nil {
				return err
			}
			if cur.ID != backing.ID || cur.UsedAt != nil || cur.RevokedAt != nil {
				st.refusal = plexus.Errorf(plexus.CodeGrantRequired, "the once grant for %s was already used; request it again", backing.CapabilityID)
				return nil
			}
			if err := tx.MarkGrantUsed(cur.ID, now); err != nil {
				return err
			}
			st.decision = cur.PendingID
			if err := tx.Record(&plexus.Activity{TraceID: ic.TraceID, Actor: plexus.ActorSystem, AgentID: ic.AgentID,
				ActionType: "grant.used", Target: cur.CapabilityID, Payload: map[string]any{"grantId": cur.ID, "jti": ic.JTI}}); err != nil {
				return err
			}
		}
		st.row = row
		return tx.Record(row)
	}
	if once {
		// Consumed in a durable transaction of its own, so two concurrent
		// calls cannot both use the grant; the grant change drops the
		// auth cache.
		err = g.update(ctx, true, fn)
	} else {
		err = g.d.Store.Update(ctx, false, fn)
	}
	if err != nil {
		return started{}, err
	}
	return st, nil
}

// priorCall is [repeated] in a read transaction of its own, for a retry the
// pipeline refuses anyway unless the journal knows its call.
func (g *Gateway) priorCall(ctx context.Context, idemHash string, now time.Time) (*plexus.Error, error) {
	var refusal *plexus.Error
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		refusal, err = repeated(tx, idemHash, now)
		return err
	})
	return refusal, err
}

// repeated looks idemHash up in the journal: a call started with it within
// the idempotency window is never dispatched again. Its retry is answered
// from the journal (the output itself is never journaled): the outcome, or
// that nobody knows it.
func repeated(tx plexus.StateTx, idemHash string, now time.Time) (*plexus.Error, error) {
	if idemHash == "" {
		return nil, nil
	}
	inv, err := tx.Invocation(idemHash, now.Add(-IdempotencyWindow))
	if errors.Is(err, plexus.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	startedID := (&plexus.Activity{ID: inv.StartedID}).AuditID()
	if inv.OutcomeID == 0 {
		e := plexus.Errorf(plexus.CodeInternalError, "a call with this idempotencyKey started (%s) and its outcome is unknown: "+
			"it may still be running, or the gateway stopped or could not journal how it ended. It is not run again: "+
			"check whether its effect happened, then retry with a new idempotencyKey if it did not", startedID)
		e.Detail = map[string]any{"outcome": "unknown", "startedAuditId": startedID}
		return e, nil
	}
	outcome, detail := "ok", map[string]any{"startedAuditId": startedID}
	if !inv.OK {
		outcome = "failed"
		detail["errorCode"] = string(inv.ErrorCode)
	}
	outcomeID := (&plexus.Activity{ID: inv.OutcomeID}).AuditID()
	detail["outcome"], detail["outcomeAuditId"] = outcome, outcomeID
	e := plexus.Errorf(plexus.CodeInternalError, "a call with this idempotencyKey already ran (%s: %s); its answer is no longer held "+
		"(the gateway restarted or forgot it), and it is not run again", outcomeID, outcome)
	e.Detail = detail
	return e, nil
}

// auditUnavailable answers a call refused before dispatch because the
// journal could not take (or tell) its started row: nothing ran, so the
// caller may retry.
func (g *Gateway) auditUnavailable(id string, err error) plexus.InvokeResponse {
	g.JournalFailed(plexus.ActionInvokeStarted+" "+id, err)
	e := plexus.WrapError(plexus.CodeInternalError, err, "audit unavailable: the call was not made; retry later")
	e.CapabilityID, e.Detail = id, map[string]any{"outcome": "not_run"}
	return deny(id, e, "")
}

// outcomeUnrecorded answers a dispatched call whose outcome row could not be
// written: its result is withheld (nothing leaves without its audit row),
// and its started row (row; nil for a read, which has none) stays the
// journal's record that it ran, so a retry with the same idempotencyKey is
// not dispatched again.
func (g *Gateway) outcomeUnrecorded(id string, row *plexus.Activity, action string, err error) plexus.InvokeResponse {
	g.JournalFailed(action+" "+id, err)
	if row == nil {
		e := plexus.WrapError(plexus.CodeInternalError, err, "audit unavailable: the result was withheld")
		e.CapabilityID, e.Detail = id, map[string]any{"outcome": "unknown"}
		return deny(id, e, "")
	}
	e := plexus.WrapError(plexus.CodeInternalError, err, "audit unavailable: the call ran ("+row.AuditID()+
		") but its outcome could not be journaled, so its result was withheld; with the same idempotencyKey it is not run again")
	e.CapabilityID, e.Detail = id, map[string]any{"outcome": "unknown", "startedAuditId": row.AuditID()}
	return deny(id, e, row.AuditID())
}
