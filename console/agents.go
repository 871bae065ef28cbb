package console

import (
	"context"
	"encoding/json"
	nethttp "net/http"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// Agents is what the Agents page asks of the gateway: the agents, and an
// agent's revocation as `plexus agents revoke` makes it. *gateway.Gateway
// implements it.
type Agents interface {
	AdminAgents(ctx context.Context, c gateway.Credentials) ([]plexus.Agent, error)
	RevokeAgent(ctx context.Context, c gateway.Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error)
}

// agentWindow is how far back the Agents page counts calls; agentRows caps
// the rows it reads per agent for that.
const (
	agentWindow = 24 * time.Hour
	agentRows   = 2000
)

// AgentView is one agent on the Agents page: the gateway's record, and
// what the journal says of its last day.
type AgentView struct {
	plexus.Agent
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Client is the client name its latest session gave (an MCP host's).
	Client string `json:"client,omitempty"`
	// Calls, Refused and RateLimited count its calls in the last day: run,
	// refused, and refused for its rate (coalesced denials included).
	Calls       int `json:"calls"`
	Refused     int `json:"refused"`
	RateLimited int `json:"rateLimited"`
}

// AgentsResponse is the body of GET /console/api/agents.
type AgentsResponse struct {
	Agents []AgentView `json:"agents"`
}

func (c *Console) handleAgents(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	agents, err := c.opts.Agents.AdminAgents(r.Context(), o.creds)
	if err != nil {
		writeError(w, nethttp.StatusBadGateway, "the gateway did not list the agents: "+err.Error())
		return
	}
	out := AgentsResponse{Agents: make([]AgentView, 0, len(agents))}
	for _, a := range agents {
		v := AgentView{Agent: a}
		if err := c.agentStats(r.Context(), &v); err != nil {
			c.log.Warn("console: read the journal for an agent", "agent", a.ID, "err", err)
		}
		out.Agents = append(out.Agents, v)
	}
	writeJSON(w, nethttp.StatusOK, out)
}

// agentStats fills v's last day from the journal.
func (c *Console) agentStats(ctx context.Context, v *AgentView) error {
	if c.opts.Activity == nil {
		return nil
	}
	rows, err := c.opts.Activity(ctx, ActivityQuery{AgentID: v.ID, Since: c.opts.Clock().Add(-agentWindow), Limit: agentRows})
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		if rows, err = c.opts.Activity(ctx, ActivityQuery{AgentID: v.ID, Limit: 1}); err != nil {
			return err
		}
	}
	for _, a := range rows {
		if a.Actor == v.ID && (v.LastSeen == nil || a.TS.After(*v.LastSeen)) {
			ts := a.TS
			v.LastSeen = &ts
		}
		if a.ActionType == "session.opened" && a.Actor == v.ID {
			if s, ok := a.Payload["client"].(string); ok {
				v.Client = s
			}
		}
		if !a.TS.Before(c.opts.Clock().Add(-agentWindow)) {
			countCall(v, a)
		}
	}
	return nil
}

// countCall counts a in v's calls: a coalesced denial row stands for
// count more denials after the first.
func countCall(v *AgentView, a plexus.Activity) {
	switch a.ActionType {
	case plexus.ActionInvokeOK, plexus.ActionInvokeFailed:
		v.Calls++
	case plexus.ActionInvokeDenied:
		n := 1
		if a.Payload["coalesced"] == true {
			n = count(a.Payload["count"])
		}
		v.Refused += n
		if a.Payload["errorCode"] == string(plexus.CodeRateLimited) {
			v.RateLimited += n
		}
	}
}

// AgentRevokeRequest is the body of POST /console/api/agents/revoke.
type AgentRevokeRequest struct {
	AgentID string `json:"agentId"`
	Reason  string `json:"reason,omitempty"`
}

// handleRevokeAgent revokes an agent: its PAT, sessions, grants and
// tokens end (the journal row says via console).
func (c *Console) handleRevokeAgent(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	var req AgentRevokeRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.AgentID) == "" {
		writeError(w, nethttp.StatusBadRequest, "say which agent to revoke")
		return
	}
	reason := revokeReason(req.Reason)
	resp, err := c.opts.Agents.RevokeAgent(r.Context(), o.creds, plexus.AgentRevokeRequest{AgentID: req.AgentID, Reason: reason})
	c.revoked(w, resp, err)
}

// count reads a summary row's count as the journal gives it back (a JSON
// number) or as it was written (an int); anything else counts none.
func count(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0
		}
		return int(i)
	}
	return 0
}
