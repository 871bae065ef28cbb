package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/plexus-gw/plexus"
)

// sourcesServer answers GET /admin/api/sources with sources and records
// every other request's method and query.
func sourcesServer(t *testing.T, sources []map[string]any) (*Admin, *[]string) {
	t.Helper()
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			writeJSON(w, 200, map[string]any{"sources": sources})
			return
		}
		calls = append(calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		writeJSON(w, 200, map[string]any{"id": "x", "kind": plexus.SourceKindExtension, "config": map[string]any{}})
	}))
	t.Cleanup(srv.Close)
	return mustAdmin(t, srv.URL), &calls
}

// TestExtensions checks the owner's extension calls: an extension added
// again is replaced in place, and only an extension is removed.
func TestExtensions(t *testing.T) {
	ctx := context.Background()
	manifest := json.RawMessage(`{"source":"notes","label":"Notes"}`)
	sources := []map[string]any{
		{"id": "notes", "kind": plexus.SourceKindExtension, "config": manifest},
		{"id": "portal:home", "kind": "portal", "config": map[string]any{}},
	}
	for _, tt := range []struct {
		name      string
		call      func(a *Admin) error
		wantCall  string // "" when nothing but the listing is asked
		wantKind  string // of a *NotExtensionError, "" for none
		wantNoExt bool
	}{
		{name: "AddNew", call: func(a *Admin) error {
			_, replaced, err := a.AddExtension(ctx, plexus.ExtensionManifest{Source: "mail"})
			if replaced {
				t.Error("a new extension reported as replaced")
			}
			return err
		}, wantCall: "POST /admin/api/sources?"},
		{name: "AddAgain", call: func(a *Admin) error {
			_, replaced, err := a.AddExtension(ctx, plexus.ExtensionManifest{Source: "notes"})
			if !replaced {
				t.Error("an extension added again not reported as replaced")
			}
			return err
		}, wantCall: "POST /admin/api/sources?replace=true"},
		{name: "Remove", call: func(a *Admin) error { return a.RemoveExtension(ctx, "notes") },
			wantCall: "DELETE /admin/api/sources/notes?purge=grants"},
		{name: "RemovePortal", call: func(a *Admin) error { return a.RemoveExtension(ctx, "portal:home") }, wantKind: "portal"},
		{name: "RemoveUnknown", call: func(a *Admin) error { return a.RemoveExtension(ctx, "nope") }, wantNoExt: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, calls := sourcesServer(t, sources)
			err := tt.call(a)
			var ne *NotExtensionError
			switch {
			case tt.wantKind != "" || tt.wantNoExt:
				if !errors.As(err, &ne) || ne.Kind != tt.wantKind {
					t.Fatalf("err = %v, want a *NotExtensionError of kind %q", err, tt.wantKind)
				}
			case err != nil:
				t.Fatal(err)
			}
			if want := tt.wantCall; (want == "" && len(*calls) != 0) || (want != "" && (len(*calls) != 1 || (*calls)[0] != want)) {
				t.Errorf("calls = %q, want %q", *calls, want)
			}
		})
	}
	a, _ := sourcesServer(t, sources)
	ms, err := a.Extensions(ctx)
	if err != nil || len(ms) != 1 || ms[0].Source != "notes" || ms[0].Label != "Notes" {
		t.Errorf("Extensions = %+v, %v; want the one extension's manifest", ms, err)
	}
}

// TestLiveSources checks the sources' status keyed by id, and that a
// gateway that does not answer is said so.
func TestLiveSources(t *testing.T) {
	ctx := context.Background()
	s := newAdminServer(t, 200, plexus.StatusResponse{Sources: []plexus.SourceStatus{{ID: "mcp:docs", Entries: 2}, {ID: "portal:notes"}}})
	live, ok := mustAdmin(t, s.srv.URL).LiveSources(ctx)
	if !ok || len(live) != 2 || live["mcp:docs"].Entries != 2 {
		t.Errorf("LiveSources = %+v, %v", live, ok)
	}
	s.srv.Close()
	if live, ok := mustAdmin(t, s.srv.URL).LiveSources(ctx); ok || live != nil {
		t.Errorf("a closed gateway: LiveSources = %+v, %v; want nil, false", live, ok)
	}
}
