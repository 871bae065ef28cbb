package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
)

// agent is the agent the owner enrolled for the scenario, calling through
// Plexus's own agent client (handshake, grants, /invoke).
type agent struct {
	d       *daemon
	c       *client.Agent
	entries []plexus.Entry // the server's, as the handshake's manifest shows them
}

// enroll is `plexus agents connect conformance --grant 'mcp.conf.*=read,write'`
// and the agent redeeming the code it printed.
func (d *daemon) enroll(ctx context.Context) (*agent, error) {
	out, err := d.plexus(ctx, nil, "agents", "connect", "conformance", "--grant", "mcp."+serverName+".*=read,write", "--json")
	if err != nil {
		return nil, err
	}
	var resp plexus.ConnectResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return nil, fmt.Errorf("agents connect --json: %w", err)
	}
	c, err := client.NewAgent(d.baseURL, client.NewCredStore(d.agentHome()))
	if err != nil {
		return nil, err
	}
	if _, err := c.Enroll(ctx, resp.Code, false); err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	hs, err := c.Handshake(ctx)
	if err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	a := &agent{d: d, c: c}
	for _, e := range hs.Manifest.Entries {
		if e.MCP != nil && e.MCP.ServerID == serverName {
			a.entries = append(a.entries, e)
		}
	}
	log.Printf("the agent sees %d entries of %s", len(a.entries), serverName)
	return a, nil
}

// find is the entry of the server's primitive ("tool", "resource",
// "prompt") of that origin name, nil when Plexus shows none.
func (a *agent) find(primitive, name string) *plexus.Entry {
	for i, e := range a.entries {
		if e.MCP.Primitive == primitive && e.MCP.OriginName == name {
			return &a.entries[i]
		}
	}
	return nil
}

// of is every entry of a primitive, in the server's order.
func (a *agent) of(primitive string) []plexus.Entry {
	var out []plexus.Entry
	for _, e := range a.entries {
		if e.MCP.Primitive == primitive {
			out = append(out, e)
		}
	}
	return out
}

// callTool calls the server's tool name with args through /invoke.
func (a *agent) callTool(ctx context.Context, name string, args map[string]any) (*plexus.InvokeResponse, error) {
	e := a.find("tool", name)
	if e == nil {
		return nil, fmt.Errorf("the agent is shown no tool %q of %s", name, serverName)
	}
	return a.call(ctx, e.ID, args)
}

// call invokes id with input. A call the standing grants do not cover
// (a tool that needs execute) waits for the owner, who approves it.
func (a *agent) call(ctx context.Context, id string, input map[string]any) (*plexus.InvokeResponse, error) {
	if input == nil {
		input = map[string]any{}
	}
	// The owner's approval runs beside the call, which waits for it; the
	// call does not return before the approval has, so nothing outlives it.
	approved := make(chan error, 1)
	pended := false
	resp, err := a.c.Call(ctx, id, input, client.CallOptions{
		Wait: true, WaitTimeout: 20 * time.Second,
		OnPending: func(p plexus.GrantPendingResponse) {
			if !pended {
				pended = true
				go func() { approved <- a.approve(ctx, p.PendingID) }()
			}
		},
	})
	if pended {
		if aerr := <-approved; aerr != nil {
			log.Printf("approve: %v", aerr)
		}
	}
	if err != nil {
		log.Printf("invoke %s: %v", id, err)
		return resp, fmt.Errorf("invoke %s: %w", id, err)
	}
	log.Printf("invoke %s: ok", id)
	return resp, nil
}

// approve is the owner's `plexus approve <id>`.
func (a *agent) approve(ctx context.Context, pendingID string) error {
	_, err := a.d.plexus(ctx, nil, "approve", pendingID)
	return err
}
