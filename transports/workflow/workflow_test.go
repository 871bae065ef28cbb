package workflow

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// pipeline stands in for the gateway's re-entrant invoke: it records each
// member call and answers from a script.
type pipeline struct {
	calls  []plexus.InvokeRequest
	ics    []plexus.InvokeContext
	answer func(req plexus.InvokeRequest) plexus.InvokeResponse
}

func (p *pipeline) invoke(_ context.Context, req plexus.InvokeRequest, ic plexus.InvokeContext) plexus.InvokeResponse {
	p.calls = append(p.calls, req)
	p.ics = append(p.ics, ic)
	return p.answer(req)
}

var entries = map[string]plexus.Entry{
	"notes.vault.read": {ID: "notes.vault.read", IO: &plexus.IOSchema{Input: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)}},
	"notes.vault.append": {ID: "notes.vault.append"}, // no schema: gets everything
}

func lookup(id string) (plexus.Entry, bool) { e, ok := entries[id]; return e, ok }

var daily = plexus.Entry{ID: "notes.daily.log", Kind: plexus.KindWorkflow, Members: []plexus.WorkflowMember{
	{ID: "notes.vault.read", Verbs: []plexus.Verb{plexus.VerbRead}},
	{ID: "notes.vault.append", Verbs: []plexus.Verb{plexus.VerbWrite}},
}}

func TestDispatchRunsMembersInOrder(t *testing.T) {
	p := &pipeline{answer: func(req plexus.InvokeRequest) plexus.InvokeResponse {
		return plexus.InvokeResponse{ID: req.ID, OK: true, Output: map[string]any{"ran": req.ID}}
	}}
	ic := plexus.InvokeContext{JTI: "tok_1", SessionID: "sess_1", TraceID: "trc"}
	input := map[string]any{"path": "today.md", "text": "went for a walk"}
	res := New(lookup).Dispatch(context.Background(), daily, input, plexus.DispatchContext{Invoke: ic, InvokeByID: p.invoke})
	if !res.OK || res.Error != nil {
		t.Fatalf("result = %+v", res)
	}
	want := []plexus.InvokeRequest{
		{ID: "notes.vault.read", Input: map[string]any{"path": "today.md"}}, // only what its schema declares
		{ID: "notes.vault.append", Input: input},
	}
	if diff := cmp.Diff(want, p.calls); diff != "" {
		t.Errorf("member calls (-want +got):\n%s", diff)
	}
	for _, got := range p.ics {
		if !cmp.Equal(got, ic) {
			t.Errorf("a member ran under %+v, not the workflow's own context", got)
		}
	}
	b, _ := json.Marshal(res.Data)
	if string(b) != `{"members":[{"id":"notes.vault.read","output":{"ran":"notes.vault.read"}},{"id":"notes.vault.append","output":{"ran":"notes.vault.append"}}]}` {
		t.Errorf("data = %s", b)
	}
}

// TestDispatchHaltsOnFailure: a member refused (the token was revoked
// between members) stops the rest; the error says which ran.
func TestDispatchHaltsOnFailure(t *testing.T) {
	p := &pipeline{answer: func(req plexus.InvokeRequest) plexus.InvokeResponse {
		if req.ID == "notes.vault.append" {
			return plexus.InvokeResponse{ID: req.ID, Error: &plexus.ErrorBody{Code: plexus.CodeTokenRevoked, Message: "token was revoked"}}
		}
		return plexus.InvokeResponse{ID: req.ID, OK: true, Output: "text"}
	}}
	three := daily
	three.Members = append(append([]plexus.WorkflowMember{}, daily.Members...), plexus.WorkflowMember{ID: "notes.vault.read", Verbs: []plexus.Verb{plexus.VerbRead}})
	res := New(lookup).Dispatch(context.Background(), three, map[string]any{"path": "a.md"}, plexus.DispatchContext{InvokeByID: p.invoke})
	if res.OK || res.Error == nil || res.Error.Code != plexus.CodeTransportError {
		t.Fatalf("result = %+v", res)
	}
	if len(p.calls) != 2 {
		t.Errorf("%d members ran after a failure, want the fan-out to stop", len(p.calls)-2)
	}
	d, _ := json.Marshal(res.Error.Detail)
	if string(d) != `{"completed":[{"id":"notes.vault.read","output":"text"}],"failed":"notes.vault.append","failedCode":"token_revoked"}` {
		t.Errorf("detail = %s", d)
	}
}

func TestDispatchCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &pipeline{answer: func(req plexus.InvokeRequest) plexus.InvokeResponse { return plexus.InvokeResponse{OK: true} }}
	res := New(lookup).Dispatch(ctx, daily, nil, plexus.DispatchContext{InvokeByID: p.invoke})
	if res.OK || len(p.calls) != 0 {
		t.Errorf("a canceled workflow ran %d members: %+v", len(p.calls), res)
	}
}
