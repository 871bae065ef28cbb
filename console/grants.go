package console

import (
	"context"
	"encoding/json"
	nethttp "net/http"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// Grants is what the Grants page asks of the gateway: the standing grants,
// and a revocation as `plexus grants revoke` makes it (the journal row says
// via console). *gateway.Gateway implements it.
type Grants interface {
	AdminGrants(ctx context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error)
	Revoke(ctx context.Context, c gateway.Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error)
}

// RevokeRequest is the body of POST /console/api/grants/revoke.
type RevokeRequest struct {
	AgentID      string `json:"agentId"`
	CapabilityID string `json:"capabilityId"`
	Reason       string `json:"reason,omitempty"`
}

func (c *Console) handleGrants(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	list, err := c.opts.Grants.AdminGrants(r.Context(), o.creds)
	if err != nil {
		writeError(w, nethttp.StatusBadGateway, "the gateway did not list the grants: "+err.Error())
		return
	}
	if list.Grants == nil {
		list.Grants = []plexus.StandingGrant{}
	}
	writeJSON(w, nethttp.StatusOK, list)
}

// handleRevoke revokes one agent's grant on one capability, and every
// token that carries it: the agent's next call with it is refused.
func (c *Console) handleRevoke(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	var req RevokeRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.AgentID) == "" || strings.TrimSpace(req.CapabilityID) == "" {
		writeError(w, nethttp.StatusBadRequest, "say which agent's grant on which capability to revoke")
		return
	}
	reason := revokeReason(req.Reason)
	resp, err := c.opts.Grants.Revoke(r.Context(), o.creds, plexus.RevokeRequest{AgentID: req.AgentID, CapabilityID: req.CapabilityID, Reason: reason})
	c.revoked(w, resp, err)
}

// revokeReason is the owner's reason for a revoke, or the console's.
func revokeReason(given string) string {
	if r := strings.TrimSpace(given); r != "" {
		return r
	}
	return "revoked by the owner in the console"
}

// revoked answers a revoke the gateway did (resp) or refused (err: an
// unknown agent or grant is 404), and wakes the open pages when it did.
func (c *Console) revoked(w nethttp.ResponseWriter, resp any, err error) {
	if err != nil {
		status := nethttp.StatusBadGateway
		if plexus.CodeOf(err) == plexus.CodeNotFound {
			status = nethttp.StatusNotFound
		}
		writeError(w, status, err.Error())
		return
	}
	c.Changed()
	writeJSON(w, nethttp.StatusOK, resp)
}
