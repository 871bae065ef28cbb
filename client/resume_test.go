package client

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// pendingAgent returns an enrolled agent of a fake gateway on which
// notes.write pends until the test decides it, and which has asked for it
// once (without waiting): the gateway holds pend_1.
func pendingAgent(t *testing.T) (*fakeGateway, *Agent) {
	t.Helper()
	g := newFakeGateway(t, newClock())
	g.pend["notes.write"], g.polls = true, 1<<30
	a := mustEnrolled(t, g)
	_, err := a.Call(context.Background(), "notes.write", nil, CallOptions{})
	var ce *Error
	if !errors.As(err, &ce) || ce.Body.PendingID != "pend_1" || ce.Resumed {
		t.Fatalf("first call: err = %#v, want a new pending pend_1", err)
	}
	return g, a
}

// remembered returns the pending requests a store remembers.
func remembered(t *testing.T, a *Agent) []pendingRequest {
	t.Helper()
	c, err := a.store.loadCache()
	if err != nil {
		t.Fatal(err)
	}
	return c.Pending
}

func wantPendingID(t *testing.T, err error, id string, resumed bool) *Error {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) || ce.Body.Code != plexus.CodeGrantPendingUser || ce.State != plexus.StatePending ||
		ce.Body.PendingID != id || ce.Resumed != resumed {
		t.Fatalf("err = %#v, want pending %s (resumed %v)", err, id, resumed)
	}
	return ce
}

func wantCounts(t *testing.T, g *fakeGateway, want map[string]int) {
	t.Helper()
	for route, n := range want {
		if got := g.count(route); got != n {
			t.Errorf("%s: %d requests, want %d", route, got, n)
		}
	}
}

func TestCallResumesPending(t *testing.T) {
	ctx := context.Background()
	t.Run("Remembered", func(t *testing.T) {
		g, a := pendingAgent(t)
		raw, err := os.ReadFile(filepath.Join(a.store.Dir(), TokensFile))
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Session struct {
				ID string `json:"sessionId"`
			} `json:"session"`
			Pending []map[string]any `json:"pending"`
		}
		if err := json.Unmarshal(raw, &file); err != nil {
			t.Fatal(err)
		}
		want := []map[string]any{{"capabilityId": "notes.write", "pendingId": "pend_1", "sessionId": file.Session.ID,
			"verbs": []any{"write"}, "createdAt": g.clock.Now().Format(time.RFC3339Nano)}}
		if diff := cmp.Diff(want, file.Pending); diff != "" || file.Session.ID == "" {
			t.Errorf("tokens.json pending (-want +got):\n%s", diff)
		}
	})
	t.Run("StillPending", func(t *testing.T) {
		g, a := pendingAgent(t)
		// Another process sharing the store resumes the same request.
		b := mustAgent(t, g, a.store.Dir())
		var notice *plexus.GrantPendingResponse
		_, err := b.Call(ctx, "notes.write", nil, CallOptions{OnPending: func(p plexus.GrantPendingResponse) { notice = &p }})
		ce := wantPendingID(t, err, "pend_1", true)
		if !strings.HasSuffix(ce.Body.GrantStatusURL, "/grants/status?pendingId=pend_1") {
			t.Errorf("status URL = %q", ce.Body.GrantStatusURL)
		}
		if notice == nil || notice.PendingID != "pend_1" || len(notice.PendingNarration) != 1 ||
			notice.PendingNarration[0].Summary != "agent-1 asks to write notes" || !cmp.Equal(notice.Pending, []string{"notes.write"}) {
			t.Errorf("OnPending got %+v, want pend_1 with the status narration", notice)
		}
		_, err = a.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_1", true)
		wantCounts(t, g, map[string]int{"PUT /grants": 1, "GET /grants/status": 2, "POST /invoke": 0})
		if p := remembered(t, a); len(p) != 1 || p[0].PendingID != "pend_1" {
			t.Errorf("remembered %+v, want pend_1 still", p)
		}
	})
	t.Run("Approved", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.decide("pend_1", plexus.StateApproved, "")
		resp, err := a.Call(ctx, "notes.write", map[string]any{"path": "a.md"}, CallOptions{})
		if err != nil || !resp.OK {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
		if p := remembered(t, a); len(p) != 0 {
			t.Errorf("remembered %+v after approval, want none", p)
		}
		// The token fetched is cached: the next call neither asks nor polls.
		if _, err := a.Call(ctx, "notes.write", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, g, map[string]int{"PUT /grants": 1, "GET /grants/status": 1, "POST /invoke": 2})
	})
	t.Run("WaitsOnIt", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.polls = 1 // the resuming poll still pends; the wait's first poll approves
		var notices []string
		resp, err := a.Call(ctx, "notes.write", nil, CallOptions{Wait: true, WaitTimeout: 10 * time.Second,
			OnPending: func(p plexus.GrantPendingResponse) { notices = append(notices, p.PendingID) }})
		if err != nil || !resp.OK {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
		if !cmp.Equal(notices, []string{"pend_1"}) {
			t.Errorf("OnPending got %v, want [pend_1]", notices)
		}
		if p := remembered(t, a); len(p) != 0 {
			t.Errorf("remembered %+v after the wait ended, want none", p)
		}
		wantCounts(t, g, map[string]int{"PUT /grants": 1, "GET /grants/status": 2, "POST /invoke": 1})
	})
	t.Run("WaitTimeoutKeepsIt", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		g.pend["notes.write"], g.polls = true, 1<<30
		a := mustEnrolled(t, g)
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{Wait: true, WaitTimeout: 300 * time.Millisecond})
		wantPendingID(t, err, "pend_1", false)
		_, err = a.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_1", true)
		wantCounts(t, g, map[string]int{"PUT /grants": 1})
	})
	t.Run("Denied", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.decide("pend_1", plexus.StateDenied, "not today")
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{})
		var ce *Error
		if !errors.As(err, &ce) || ce.Body.Code != plexus.CodeGrantRequired || ce.State != plexus.StateDenied ||
			ce.Body.PendingID != "pend_1" || !ce.Resumed || !strings.Contains(ce.Body.Message, "denied") ||
			!strings.Contains(ce.Body.Message, "not today") {
			t.Fatalf("err = %#v, want the owner's denial of pend_1 with the reason", err)
		}
		wantCounts(t, g, map[string]int{"PUT /grants": 1})
		if p := remembered(t, a); len(p) != 0 {
			t.Errorf("remembered %+v after the denial was reported, want none", p)
		}
		// Reported once: the next call asks anew.
		_, err = a.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_2", false)
		wantCounts(t, g, map[string]int{"PUT /grants": 2})
	})
	for _, state := range []string{plexus.StateExpired, plexus.StateWithdrawn, ""} {
		name := state
		if name == "" {
			name = "not_found"
		}
		t.Run("AsksAnewWhen_"+name, func(t *testing.T) {
			g, a := pendingAgent(t)
			g.decide("pend_1", state, "")
			_, err := a.Call(ctx, "notes.write", nil, CallOptions{})
			wantPendingID(t, err, "pend_2", false)
			wantCounts(t, g, map[string]int{"PUT /grants": 2, "GET /grants/status": 1})
			if p := remembered(t, a); len(p) != 1 || p[0].PendingID != "pend_2" {
				t.Errorf("remembered %+v, want pend_2 only", p)
			}
		})
	}
	t.Run("AsksAnewWhenApprovedWithoutToken", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.decide("pend_1", plexus.StateApproved, "")
		g.mu.Lock()
		g.pendings["pend_1"].sessionID = "sess_other" // the token went to another session
		g.mu.Unlock()
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_2", false)
		wantCounts(t, g, map[string]int{"PUT /grants": 2})
	})
	t.Run("AsksAnewWhenSessionGone", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.restart() // the status poll answers session_expired: handshake, ask anew
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_2", false)
		wantCounts(t, g, map[string]int{"PUT /grants": 2, "POST /link/handshake": 2})
		c, _ := a.store.loadCache()
		if len(c.Pending) != 1 || c.Pending[0].PendingID != "pend_2" || c.Pending[0].SessionID != c.Session.ID {
			t.Errorf("remembered %+v under session %+v, want pend_2 of the new session", c.Pending, c.Session)
		}
	})
	t.Run("AsksAnewWhenSessionExpired", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.clock.Advance(2 * time.Hour) // past the session; a new process must handshake
		b := mustAgent(t, g, a.store.Dir())
		_, err := b.Call(ctx, "notes.write", nil, CallOptions{})
		wantPendingID(t, err, "pend_2", false)
		// The new session cannot fetch the old request's token: not even polled.
		wantCounts(t, g, map[string]int{"PUT /grants": 2, "GET /grants/status": 0, "POST /link/handshake": 2})
	})
	t.Run("AsksAnewForMoreVerbs", func(t *testing.T) {
		g, a := pendingAgent(t)
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{Verbs: []plexus.Verb{plexus.VerbRead}})
		wantPendingID(t, err, "pend_2", false)
		wantCounts(t, g, map[string]int{"PUT /grants": 2, "GET /grants/status": 0})
		if p := remembered(t, a); len(p) != 1 || !cmp.Equal(p[0].Verbs, []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}) {
			t.Errorf("remembered %+v, want pend_2 for read+write", p)
		}
	})
	t.Run("KeptWhenUnreachable", func(t *testing.T) {
		g, a := pendingAgent(t)
		g.srv.Close()
		if _, err := a.Call(ctx, "notes.write", nil, CallOptions{}); err == nil || isGatewayError(err) {
			t.Fatalf("err = %v, want a transport error", err)
		}
		if p := remembered(t, a); len(p) != 1 || p[0].PendingID != "pend_1" {
			t.Errorf("remembered %+v, want pend_1 kept", p)
		}
	})
}
