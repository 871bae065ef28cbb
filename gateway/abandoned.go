package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/plexus-gw/plexus"
)

// AbandonedCall is a call of an edge (the MCP front door) that never ran:
// its caller went while it waited for the owner's decision on a grant, or
// as that decision came.
type AbandonedCall struct {
	// ID is the capability called; Verbs what its grant was asked for.
	ID    string
	Verbs []plexus.Verb
	// PendingID is the decision the call waited on ("" when none is
	// known); the row joins its story (trace).
	PendingID string
	// Waited is how long the call waited before its caller went.
	Waited time.Duration
	// Reason says how the caller went (no input, no secret: a fixed phrase
	// of the edge's).
	Reason string
}

// CallAbandoned journals a call that never ran because its caller went
// before it could run: an invoke.failed row (errorCode transport_error,
// as any cancelled call), actor the session's agent, with no jti and no
// startedId (no token was presented, nothing was dispatched), so that the
// journal shows what became of every call an agent made, not only of those
// that ran. The session need not be live any more (its host may be what
// went); one the journal does not hold journals nothing.
func (g *Gateway) CallAbandoned(ctx context.Context, c Credentials, call AbandonedCall) error {
	var sess *plexus.Session
	var trace string
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		if sess, err = tx.Session(c.SessionID); err != nil {
			return err
		}
		if call.PendingID == "" {
			return nil
		}
		p, err := tx.Pending(call.PendingID)
		switch {
		case errors.Is(err, plexus.ErrNotFound):
		case err != nil:
			return err
		case p.SessionID == sess.ID:
			trace = p.TraceID
		}
		return nil
	}); err != nil {
		return plexus.WrapError(plexus.CodeInternalError, err, "could not read the abandoned call's session")
	}
	payload := map[string]any{"sessionId": sess.ID, "verbs": call.Verbs, "errorCode": string(plexus.CodeTransportError),
		"reason": call.Reason, "durationMs": call.Waited.Milliseconds()}
	if call.PendingID != "" {
		payload["pendingId"] = call.PendingID
	}
	row := &plexus.Activity{TraceID: trace, Actor: sess.AgentID, AgentID: sess.AgentID, ActionType: plexus.ActionInvokeFailed,
		Target: call.ID, Payload: payload}
	if err := g.record(context.WithoutCancel(ctx), false, row); err != nil {
		return plexus.WrapError(plexus.CodePersistFailed, err, "could not journal the abandoned call")
	}
	return nil
}
