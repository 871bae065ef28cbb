package localrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/localrest"
)

func TestSecret(t *testing.T) {
	var s seen
	// The server echoes everything that could carry the secret back, on
	// success and on failure.
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		got := s.record(r)
		echo := map[string]any{"auth": got.Auth, "apiKey": got.APIKey, "query": got.Query, "url": r.URL.String(),
			"nested": []any{map[string]any{got.APIKey: "as a key"}}}
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(echo)
		case "/text":
			fmt.Fprintf(w, "auth=%s apiKey=%s query=%s", got.Auth, got.APIKey, got.Query)
		default:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "bad credentials auth=%s apiKey=%s query=%s", got.Auth, got.APIKey, got.Query)
		}
	})
	for _, tc := range []struct {
		name   string
		secret string
		check  func(seenReq) bool
	}{
		{"Bearer", `{"name":"svc-key","attach":"bearer"}`, func(r seenReq) bool { return r.Auth == "Bearer "+secretValue }},
		{"BearerByDefault", `{"name":"svc-key"}`, func(r seenReq) bool { return r.Auth == "Bearer "+secretValue }},
		{"Header", `{"name":"svc-key","attach":"header","as":"X-Api-Key"}`, func(r seenReq) bool {
			return r.APIKey == secretValue && r.Auth == ""
		}},
		{"Query", `{"name":"svc-key","attach":"query","as":"api key"}`, func(r seenReq) bool {
			q, err := url.ParseQuery(r.Query)
			return err == nil && q.Get("api key") == secretValue && q.Get("q") == "x" && r.Auth == ""
		}},
	} {
		for _, path := range []string{"/json", "/text", "/fail"} {
			t.Run(tc.name+path, func(t *testing.T) {
				res := fx.call(`{"pathTemplate":"`+path+`","secret":`+tc.secret+`}`, map[string]any{"q": "x"})
				if !tc.check(s.last(t)) {
					t.Fatalf("the server saw %+v, not the secret attached as %s", s.last(t), tc.secret)
				}
				noSecret(t, res)
				if path == "/fail" {
					wantCode(t, res, plexus.CodeTransportError, "401 Unauthorized: bad credentials")
					if !strings.Contains(res.Error.Message, "[redacted]") {
						t.Fatalf("message %q: want the echoed secret redacted", res.Error.Message)
					}
					return
				}
				wantOK(t, res)
				if !strings.Contains(fmt.Sprint(res.Data), "[redacted]") {
					t.Fatalf("data %v: want the echoed secret redacted", res.Data)
				}
			})
		}
	}

	t.Run("QueryCollidesWithInput", func(t *testing.T) {
		n := s.count()
		res := fx.call(`{"pathTemplate":"/json","secret":{"name":"svc-key","attach":"query","as":"key"}}`, map[string]any{"key": "mine"})
		wantCode(t, res, plexus.CodeTransportError, `input field "key" collides`)
		if s.count() != n {
			t.Fatal("the request was sent")
		}
	})
	t.Run("AttachFromManifest", func(t *testing.T) {
		raw, _ := json.Marshal(plexus.ExtensionRoute{
			Decl:        json.RawMessage(`{"pathTemplate":"/json","secret":{"name":"svc-key"}}`),
			ServiceHint: &plexus.LocalServiceHint{App: "svc"},
			Secrets:     []plexus.ExtensionSecretRef{{Name: secretName, Attach: plexus.AttachHeader, As: "X-Api-Key"}},
		})
		res := fx.tr.Dispatch(context.Background(), plexus.Entry{ID: "svc.thing.read", Route: raw}, nil, plexus.DispatchContext{})
		wantOK(t, res)
		if got := s.last(t); got.APIKey != secretValue || got.Auth != "" {
			t.Fatalf("server saw %+v, want the secret in X-Api-Key as the manifest declares", got)
		}
	})
	t.Run("ResolvedAtEachDispatch", func(t *testing.T) {
		store := secretStore{}
		tr := newTransport(t, locator{base: fx.srv.URL}, store, localrest.Options{})
		decl := `{"pathTemplate":"/json","secret":{"name":"svc-key"}}`
		wantCode(t, tr.Dispatch(context.Background(), entry(t, decl), nil, plexus.DispatchContext{}),
			plexus.CodeTransportError, "secret \"svc-key\" is not set; run `plexus secrets set svc-key`")
		store[secretName] = "later"
		wantOK(t, tr.Dispatch(context.Background(), entry(t, decl), nil, plexus.DispatchContext{}))
		if got := s.last(t); got.Auth != "Bearer later" {
			t.Fatalf("server saw %q, want the secret set after the first call", got.Auth)
		}
	})
}

// brokenStore fails to read any secret, as a store whose file cannot be
// opened would.
type brokenStore struct{}

func (brokenStore) Secret(string) (string, error) { return "", errors.New("permission denied") }

func TestMissingSecret(t *testing.T) {
	var s seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.record(r) }))
	t.Cleanup(srv.Close)
	decl := `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"bearer"}}`
	for _, tc := range []struct {
		name  string
		store localrest.Secrets
		want  string
	}{
		{"Absent", secretStore{}, "secret \"svc-key\" is not set; run `plexus secrets set svc-key`"},
		{"Empty", secretStore{secretName: ""}, "run `plexus secrets set svc-key`"},
		{"Unreadable", brokenStore{}, `secret "svc-key" could not be read`},
		{"Newline", secretStore{secretName: "abc\n"}, "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport(t, locator{base: srv.URL}, tc.store, localrest.Options{})
			wantCode(t, tr.Dispatch(context.Background(), entry(t, decl), nil, plexus.DispatchContext{}), plexus.CodeTransportError, tc.want)
		})
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the server saw %d requests without a usable secret, want none", n)
	}
}
