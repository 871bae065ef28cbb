package gateway

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// ActionViewChanged is the row of an owner's change to an agent's MCP view
// (mcp-views.json): what the agent's MCP hosts are shown from then on.
const ActionViewChanged = "view.changed"

// OnViewChanged journals that the owner changed agent's MCP view to view
// (its fields as the views file holds them; empty: the default view
// again). The file is the owner's edit, through `plexus agents view`,
// `plexus clients connect` or an editor: the row records that it took
// effect. A row that cannot be written fails closed like every other.
func (g *Gateway) OnViewChanged(ctx context.Context, agent string, view map[string]any) {
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, AgentID: agent, ActionType: ActionViewChanged,
			Target: agent, Payload: map[string]any{"view": view}})
	})
	if err != nil {
		g.JournalFailed(ActionViewChanged+" "+agent, err)
	}
}
