package console

import (
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestCountCall(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		rows                        []plexus.Activity
		calls, refused, rateLimited int
	}{
		{"Calls", []plexus.Activity{{ActionType: plexus.ActionInvokeOK}, {ActionType: plexus.ActionInvokeFailed}, {ActionType: "grant.requested"}}, 2, 0, 0},
		{"Refused", []plexus.Activity{{ActionType: plexus.ActionInvokeDenied, Payload: map[string]any{"errorCode": "grant_required"}}}, 0, 1, 0},
		{"RateLimitedCoalesced", []plexus.Activity{
			{ActionType: plexus.ActionInvokeDenied, Payload: map[string]any{"errorCode": "rate_limited"}},
			{ActionType: plexus.ActionInvokeDenied, Payload: map[string]any{"errorCode": "rate_limited", "coalesced": true, "count": float64(41)}},
		}, 0, 42, 42},
		{"CountWithoutCoalesced", []plexus.Activity{{ActionType: plexus.ActionInvokeDenied, Payload: map[string]any{"count": float64(9)}}}, 0, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v AgentView
			for _, a := range tt.rows {
				countCall(&v, a)
			}
			if v.Calls != tt.calls || v.Refused != tt.refused || v.RateLimited != tt.rateLimited {
				t.Errorf("calls %d, refused %d, rate-limited %d; want %d, %d, %d", v.Calls, v.Refused, v.RateLimited, tt.calls, tt.refused, tt.rateLimited)
			}
		})
	}
}
