package http

import (
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// connectBody is POST /admin/api/agents/connect as either implementation
// sends it: Plexus's grants, or the TypeScript implementation's selection
// (capabilities, standing, its legacy alias standingExecute, one
// trustWindow, agentType, ttlMs). docs/protocol.md says which of the
// latter are honoured and which are refused.
type connectBody struct {
	plexus.ConnectRequest
	Capabilities    []string            `json:"capabilities"`
	Standing        []string            `json:"standing"`
	StandingExecute []string            `json:"standingExecute"`
	TrustWindow     *plexus.TrustWindow `json:"trustWindow"`
	AgentType       string              `json:"agentType"`
	TTLMs           *float64            `json:"ttlMs"`
}

// selects reports whether the body uses the TypeScript form.
func (b *connectBody) selects() bool {
	return b.Capabilities != nil || b.Standing != nil || b.StandingExecute != nil || b.TrustWindow != nil ||
		b.AgentType != "" || b.TTLMs != nil
}

// selection is the body's selection, or an invalid_request naming what
// Plexus does not do: a code's lifetime is not the caller's to set.
// agentType is accepted and has no effect: every agent enrolls with the
// same command here.
func (b *connectBody) selection() (gateway.Selection, error) {
	if b.TTLMs != nil {
		return gateway.Selection{}, plexus.Errorf(plexus.CodeInvalidRequest,
			"ttlMs is not accepted: an enrollment code lives 15 minutes and is used once")
	}
	return gateway.Selection{Capabilities: b.Capabilities, Standing: append(b.Standing, b.StandingExecute...),
		TrustWindow: b.TrustWindow}, nil
}

// connectSelectedResponse answers a connect in the TypeScript form: the
// Plexus response, with that form's ok, granted (the standing grants made)
// and skipped (the selected capability ids not granted; their reasons are in
// declined).
type connectSelectedResponse struct {
	plexus.ConnectResponse
	OK      bool                   `json:"ok"`
	Granted []plexus.StandingGrant `json:"granted"`
	Skipped []string               `json:"skipped"`
}

func selectedResponse(resp plexus.ConnectResponse, skipped []plexus.Declined) connectSelectedResponse {
	// Never null: that implementation's scripts iterate both (jq '.granted[]').
	out := connectSelectedResponse{ConnectResponse: resp, OK: true, Granted: resp.Grants, Skipped: []string{}}
	if out.Granted == nil {
		out.Granted = []plexus.StandingGrant{}
	}
	for _, d := range skipped {
		out.Skipped = append(out.Skipped, d.ID)
	}
	out.Declined = append(out.Declined, skipped...)
	return out
}
