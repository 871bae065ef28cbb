package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// adminServer answers one admin route with status and body, recording the
// request it got.
type adminServer struct {
	srv    *httptest.Server
	method string
	path   string
	auth   string
	via    string
	body   []byte
}

func newAdminServer(t *testing.T, status int, resp any) *adminServer {
	t.Helper()
	s := &adminServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.method, s.path, s.auth, s.via = r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get(plexus.ViaHeader)
		var raw json.RawMessage
		if json.NewDecoder(r.Body).Decode(&raw) == nil {
			s.body = raw
		}
		writeJSON(w, status, resp)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func mustAdmin(tb testing.TB, url string) *Admin {
	tb.Helper()
	a, err := NewAdmin(url, fakeKey)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func TestAdmin(t *testing.T) {
	ctx := context.Background()
	t.Run("Connect", func(t *testing.T) {
		exp := time.Date(2026, 6, 23, 10, 15, 0, 0, time.UTC)
		s := newAdminServer(t, 200, plexus.ConnectResponse{AgentID: "claude", Code: "plx_enroll_x", ExpiresAt: exp})
		req := plexus.ConnectRequest{AgentID: "claude", Label: "Claude", Grants: []plexus.ConnectGrant{{CapabilityID: "notes.read"}}}
		got, err := mustAdmin(t, s.srv.URL).Connect(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got.Code != "plx_enroll_x" || !got.ExpiresAt.Equal(exp) {
			t.Errorf("resp = %+v", got)
		}
		if s.method != "POST" || s.path != "/admin/api/agents/connect" || s.auth != "Bearer "+fakeKey {
			t.Errorf("request = %s %s auth %q", s.method, s.path, s.auth)
		}
		var sent plexus.ConnectRequest
		if err := json.Unmarshal(s.body, &sent); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(req, sent); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	})
	t.Run("RotateKeySwitchesKey", func(t *testing.T) {
		s := newAdminServer(t, 200, plexus.KeyRotateResponse{ConnectionKey: "plx_live_new"})
		a := mustAdmin(t, s.srv.URL)
		if _, err := a.RotateKey(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if s.auth != "Bearer plx_live_new" {
			t.Errorf("after rotation auth = %q", s.auth)
		}
	})
	t.Run("RevokeGrant", func(t *testing.T) {
		s := newAdminServer(t, 200, plexus.RevokeResponse{OK: true, GrantRemoved: true})
		got, err := mustAdmin(t, s.srv.URL).RevokeGrant(ctx, "claude", "notes.write", "done")
		if err != nil || !got.GrantRemoved {
			t.Fatalf("resp = %+v, err = %v", got, err)
		}
		want := `{"agentId":"claude","capabilityId":"notes.write","reason":"done"}`
		if s.path != "/grants/revoke" || string(s.body) != want {
			t.Errorf("request %s %s", s.path, s.body)
		}
	})
	t.Run("AgentsEitherShape", func(t *testing.T) {
		agents := []plexus.Agent{{ID: "claude", Label: "Claude"}}
		for _, body := range []any{agents, map[string]any{"agents": agents}} {
			s := newAdminServer(t, 200, body)
			got, err := mustAdmin(t, s.srv.URL).Agents(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(agents, got); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("Sources", func(t *testing.T) {
		cfg := json.RawMessage(`{"path":"/n","alias":"notes"}`)
		want := []plexus.SourceConfig{{ID: "portal:notes", Kind: "portal", Config: []byte(cfg)}}
		for _, body := range []any{
			map[string]any{"sources": []map[string]any{{"id": "portal:notes", "kind": "portal", "config": cfg}}},
			want, // the byte slice's base64 form
		} {
			s := newAdminServer(t, 200, body)
			got, err := mustAdmin(t, s.srv.URL).Sources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sources (-want +got):\n%s", diff)
			}
		}
		s := newAdminServer(t, 201, map[string]any{"id": "portal:notes", "kind": "portal", "config": cfg})
		a, err := NewAdmin(s.srv.URL, fakeKey, WithVia(plexus.ViaCLI))
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.AddSource(ctx, want[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Config) != string(cfg) || string(s.body) != `{"id":"portal:notes","kind":"portal","config":{"path":"/n","alias":"notes"}}` {
			t.Errorf("added %s, sent %s", got.Config, s.body)
		}
		if s.via != plexus.ViaCLI {
			t.Errorf("%s = %q, want %q", plexus.ViaHeader, s.via, plexus.ViaCLI)
		}
	})
	t.Run("ErrEnvelope", func(t *testing.T) {
		s := newAdminServer(t, 401, plexus.ErrorResponse{Error: &plexus.ErrorBody{Code: plexus.CodeUnauthorized, Message: "bad key"}})
		_, err := mustAdmin(t, s.srv.URL).Agents(ctx)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want *Error", err)
		}
		want := &Error{Status: 401, Body: plexus.ErrorBody{Code: plexus.CodeUnauthorized, Message: "bad key"}}
		if diff := cmp.Diff(want, ce); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
		if err.Error() != "unauthorized: bad key" {
			t.Errorf("message = %q", err.Error())
		}
	})
	t.Run("ErrNotEnvelope", func(t *testing.T) {
		s := newAdminServer(t, 502, "upstream sad")
		_, err := mustAdmin(t, s.srv.URL).Sources(ctx)
		var ce *Error
		if !errors.As(err, &ce) || ce.Status != 502 || ce.Body.Code != plexus.CodeInternalError {
			t.Fatalf("err = %#v", err)
		}
	})
	t.Run("ErrUnreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, err = mustAdmin(t, "http://"+addr).Status(ctx)
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("err = %v, want ErrUnreachable", err)
		}
	})
}

func TestNewConn(t *testing.T) {
	for _, tt := range []struct {
		url  string
		ok   bool
		host string
	}{
		{"http://127.0.0.1:7077", true, "127.0.0.1:7077"},
		{"http://localhost:7077/", true, "localhost:7077"},
		{"http://[::1]:7077", true, "[::1]:7077"},
		{"http://127.0.0.1", false, ""},
		{"ftp://127.0.0.1:21", false, ""},
		{"http://user:pw@127.0.0.1:7077", false, ""},
		{"127.0.0.1:7077", false, ""},
		{"http://127.0.0.1:7077/?x=1", false, ""},
	} {
		c, err := newConn(tt.url, newConfig(nil))
		if (err == nil) != tt.ok {
			t.Errorf("newConn(%q) err = %v, want ok %v", tt.url, err, tt.ok)
			continue
		}
		if tt.ok && c.host != tt.host {
			t.Errorf("newConn(%q) host = %q, want %q", tt.url, c.host, tt.host)
		}
	}
}
