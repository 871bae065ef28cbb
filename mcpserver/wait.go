package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// await waits for the owner's decision on pendingID, up to ApprovalWait,
// telling the host it waits every ProgressInterval. It listens for the
// session's grant_resolved events, and asks GrantStatus when one names the
// decision (and at every tick when the event stream is unavailable or
// ended), so a decision made by any channel — a moved file, plexus approve,
// the admin API — ends the wait. The host's cancellation ends it too.
func (s *Server) await(ctx context.Context, l *link, entry plexus.Entry, pendingID string, p *progress) (plexus.ScopedToken, *mcp.CallToolResult, error) {
	sub, stop := context.WithCancel(ctx)
	defer stop()
	events, err := s.b.Grants.Subscribe(sub, l.creds(), 0)
	if err != nil {
		// Over the stream caps, or the session just ended: polling at
		// every tick still sees the decision (or the ended session).
		events = nil
	}
	// The decision may have landed before the subscription: look once.
	if o, done := s.decided(ctx, l, entry, pendingID); done {
		return o.tok, o.answer, o.err
	}
	limit := time.NewTimer(s.opts.ApprovalWait)
	defer limit.Stop()
	tick := time.NewTicker(s.opts.ProgressInterval)
	defer tick.Stop()
	waitMsg := fmt.Sprintf("waiting for the owner to approve %s (plexus approve %s)", entry.ID, pendingID)
	p.waiting(waitMsg)
	for {
		select {
		case <-ctx.Done():
			return plexus.ScopedToken{}, nil, ctx.Err()
		case <-limit.C:
			return plexus.ScopedToken{}, s.undecidedResult(entry.ID, pendingID), nil
		case <-tick.C:
			p.waiting(waitMsg)
			if events != nil {
				continue
			}
		case ev, ok := <-events:
			if !ok {
				events = nil // dropped or ended: poll from now on
			} else if !resolves(ev, pendingID) {
				continue
			}
		}
		if o, done := s.decided(ctx, l, entry, pendingID); done {
			return o.tok, o.answer, o.err
		}
	}
}

// resolves reports whether ev is the grant_resolved of pendingID.
func resolves(ev plexus.Event, pendingID string) bool {
	if ev.Type != plexus.EventGrantResolved {
		return false
	}
	var gr plexus.GrantResolvedEvent
	return json.Unmarshal(ev.Data, &gr) == nil && gr.PendingID == pendingID
}

// outcome is how a wait for the owner ends: a token, or an answer that ends
// the call, or an error.
type outcome struct {
	tok    plexus.ScopedToken
	answer *mcp.CallToolResult
	err    error
}

// decided asks the decision's state; done is false while it is pending.
func (s *Server) decided(ctx context.Context, l *link, entry plexus.Entry, pendingID string) (o outcome, done bool) {
	st, err := s.b.Grants.GrantStatus(ctx, l.creds(), pendingID)
	if err != nil && ctx.Err() != nil {
		// The host went (its event stream ends with it, so this can be
		// asked as it goes): the decision stays for a later call.
		return outcome{err: ctx.Err()}, true
	}
	if err != nil {
		l.forgetPending(entry.ID, pendingID)
		if plexus.CodeOf(err) == plexus.CodeSessionExpired {
			return outcome{err: s.gatewayError(l, err)}, true
		}
		return outcome{answer: errorResult(plexus.AsError(err).Body(), entry.ID)}, true
	}
	switch st.State {
	case plexus.StatePending:
		return outcome{}, false
	case plexus.StateApproved:
		l.forgetPending(entry.ID, pendingID)
		if st.Token == nil || st.Token.Token == "" {
			// Approved, but its token went to no one here (its grant
			// ended since): say so; calling again asks anew.
			return outcome{answer: errorResult(&plexus.ErrorBody{Code: plexus.CodeGrantRequired,
				Message: "the owner approved, but the grant has ended since; call the tool again"}, entry.ID)}, true
		}
		tok, answer, err := s.keep(l, entry, *st.Token)
		return outcome{tok, answer, err}, true
	case plexus.StateDenied:
		l.forgetPending(entry.ID, pendingID)
		return outcome{answer: deniedResult(entry.ID, orElse(st.Reason, "no reason given"))}, true
	default: // expired, withdrawn
		l.forgetPending(entry.ID, pendingID)
		return outcome{answer: errorResult(&plexus.ErrorBody{Code: plexus.CodeGrantRequired, PendingID: pendingID,
			Message: fmt.Sprintf("the request for %s was %s without a decision; call the tool again to ask anew", entry.ID, st.State)}, entry.ID)}, true
	}
}
