package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
)

// specManifest is one of the spec's worked manifests (registry/testdata).
func specManifest(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join("..", "registry", "testdata", name)
}

// writeManifest writes m as a manifest file in a temp folder.
func writeManifest(t *testing.T, m any) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIExtValidate(t *testing.T) {
	e := &cliEnv{t: t, home: filepath.Join(t.TempDir(), "home"), addr: "127.0.0.1:1", agentHome: t.TempDir()}

	t.Run("OK", func(t *testing.T) {
		r := e.with(t).ok("ext", "validate", specManifest(t, "obsidian.json"))
		if !strings.Contains(r.stdout, "Valid: obsidian") || !strings.Contains(r.stdout, "obsidian.vault.read  capability  read") {
			t.Errorf("%s", r)
		}
	})
	t.Run("ErrNamesFields", func(t *testing.T) {
		var m map[string]any
		b, err := os.ReadFile(specManifest(t, "prettier.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["transport"] = "mcp"
		m["capabilities"].([]any)[0].(map[string]any)["name"] = "Format"
		r := e.with(t).run("ext", "validate", writeManifest(t, m))
		if r.code != exitError || !strings.Contains(r.stdout, "transport: mcp is not an extension transport") ||
			!strings.Contains(r.stdout, "capabilities[0].name:") || !strings.Contains(r.stdout, "fix: ") {
			t.Errorf("%s", r)
		}
	})
	t.Run("ErrJSON", func(t *testing.T) {
		var problems struct {
			Valid    bool `json:"valid"`
			Problems []struct {
				Field string `json:"field"`
			} `json:"problems"`
		}
		r := e.with(t).run("ext", "validate", "--json", writeManifest(t, map[string]any{"manifest": plexus.ManifestVersion, "capabilites": []any{}}))
		if err := json.Unmarshal([]byte(r.stdout), &problems); err != nil || r.code != exitError || problems.Valid ||
			len(problems.Problems) != 1 || problems.Problems[0].Field != "capabilites" {
			t.Errorf("%s (%v)", r, err)
		}
	})
	t.Run("OfflineMembers", func(t *testing.T) {
		var m map[string]any
		b, _ := os.ReadFile(specManifest(t, "notes-workflow.json"))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["capabilities"].([]any)[2].(map[string]any)["members"].([]any)[0].(map[string]any)["id"] = "portal.notes.read"
		r := e.with(t).ok("ext", "validate", writeManifest(t, m))
		if !strings.Contains(r.stdout, "Note: capabilities[2].members[0]: portal.notes.read is not declared here") {
			t.Errorf("%s", r)
		}
	})
}

// TestCLIExtAddRemove: an owner's extension registers at once with managed
// provenance, bumps the revision with manifest_changed, survives a restart,
// and once removed does not come back.
func TestCLIExtAddRemove(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	td := startTestDaemon(t, daemon.Options{Home: home})
	e := &cliEnv{t: t, home: home, addr: td.Addr(), agentHome: t.TempDir()}
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	rev := td.Registry().Revision()

	r := e.ok("ext", "add", specManifest(t, "notes-workflow.json"))
	if !strings.Contains(r.stdout, "Extension notes added (Notes helpers, managed)") || !strings.Contains(r.stdout, "notes.daily.log  workflow  read,write") {
		t.Errorf("%s", r)
	}
	ev := waitEvent(t, events, plexus.EventManifestChanged)
	var mc plexus.ManifestChangedEvent
	if err := json.Unmarshal([]byte(ev.Data), &mc); err != nil || mc.Revision <= rev || mc.Changed == nil ||
		!slices.Equal(mc.Changed.Added, []string{"notes.daily.log", "notes.vault.append", "notes.vault.read"}) {
		t.Errorf("manifest_changed = %s (%v), revision before %d", ev.Data, err, rev)
	}
	var man plexus.ManifestResponse
	td.call(t, "GET", "/manifest", session(sid), nil, &man)
	var got []string
	for _, en := range man.Manifest.Entries {
		if en.Source == "notes" {
			got = append(got, en.ID+":"+string(en.Provenance))
			if en.ID == "notes.daily.log" && len(en.Members) != 2 {
				t.Errorf("workflow members = %+v", en.Members)
			}
		}
	}
	if !slices.Equal(got, []string{"notes.daily.log:managed", "notes.vault.append:managed", "notes.vault.read:managed"}) {
		t.Errorf("manifest entries of notes = %v", got)
	}
	if rows := td.activity(t, journal.Filter{Type: "source.added"}); len(rows) != 1 || rows[0].Target != "notes" || rows[0].Payload["kind"] != gateway.SourceKindExtension {
		t.Errorf("source.added rows = %+v", rows)
	}

	// Registering it again replaces it in place: one revision, one
	// manifest_changed with what changed.
	var m map[string]any
	b, _ := os.ReadFile(specManifest(t, "notes-workflow.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	caps := m["capabilities"].([]any)
	caps[0].(map[string]any)["label"] = "Read a note, v2"
	m["capabilities"] = caps[:2] // the workflow is gone in v2
	rev = td.Registry().Revision()
	if r := e.ok("ext", "add", writeManifest(t, m)); !strings.Contains(r.stdout, "Extension notes re-registered") {
		t.Errorf("re-add: %s", r)
	}
	ev = waitEvent(t, events, plexus.EventManifestChanged)
	mc = plexus.ManifestChangedEvent{}
	if err := json.Unmarshal([]byte(ev.Data), &mc); err != nil || mc.Revision != rev+1 || mc.Changed == nil ||
		!slices.Equal(mc.Changed.Removed, []string{"notes.daily.log"}) || !slices.Contains(mc.Changed.Updated, "notes.vault.read") {
		t.Errorf("manifest_changed after a re-registration = %s (%v), revision before %d", ev.Data, err, rev)
	}
	if rows := td.activity(t, journal.Filter{Type: "source.replaced"}); len(rows) != 1 || rows[0].Target != "notes" {
		t.Errorf("source.replaced rows = %+v", rows)
	}

	// An invalid registration is refused with its problems and changes
	// nothing.
	bad := map[string]any{"manifest": plexus.ManifestVersion, "source": "broken", "label": "x", "transport": "cli", "capabilities": []any{}}
	if r := e.run("ext", "add", writeManifest(t, bad)); r.code != exitError || !strings.Contains(r.stdout, "capabilities: empty") {
		t.Errorf("invalid add: %s", r)
	}
	if _, ok := td.Registry().Source("broken"); ok {
		t.Error("an invalid manifest was registered")
	}

	var list []plexus.ExtensionManifest
	e.jsonOut(&list, "ext", "list", "--json")
	if len(list) != 1 || list[0].Source != "notes" {
		t.Errorf("ext list = %+v", list)
	}

	// Persisted: back after a restart, with the same entries.
	td.stop()
	td = startTestDaemon(t, daemon.Options{Home: home})
	e.addr = td.Addr()
	if e, ok := td.Registry().Entry("notes.vault.read"); !ok || e.Label != "Read a note, v2" {
		t.Fatalf("the extension (as re-registered) did not come back after a restart: %+v", e)
	}

	// A grant of one of its entries, with a live token...
	_, sid = enrolledAgent(t, td, "claude")
	events = td.openEvents(t, sid, "")
	var tok plexus.ScopedToken
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"notes.vault.read": "allow"}}, &tok); st != 200 || tok.JTI == "" {
		t.Fatalf("grant of notes.vault.read: status %d, %+v", st, tok)
	}
	// ...is revoked when the extension is removed.
	e.ok("ext", "remove", "notes")
	if _, ok := td.Registry().Entry("notes.vault.read"); ok {
		t.Error("removed extension still offered")
	}
	eventWhere(t, events, plexus.EventTokenRevoked, func(r plexus.TokenRevokedEvent) bool { return r.JTI == tok.JTI })
	var ledger plexus.GrantsListResponse
	td.call(t, "GET", "/admin/api/grants", td.admin(), nil, &ledger)
	for _, g := range ledger.Grants {
		if g.CapabilityID == "notes.vault.read" {
			t.Errorf("a removed extension's grant stands: %+v", g)
		}
	}
	if rows := td.activity(t, journal.Filter{Type: "source.removed"}); len(rows) != 1 || fmt.Sprint(rows[0].Payload["purgedGrants"]) != "1" {
		t.Errorf("source.removed rows = %+v", rows)
	}
	if r := e.run("ext", "remove", "notes"); r.code != exitError || !strings.Contains(r.stderr, `no extension "notes"`) {
		t.Errorf("remove twice: %s", r)
	}
	td.stop()
	td = startTestDaemon(t, daemon.Options{Home: home})
	if _, ok := td.Registry().Source("notes"); ok {
		t.Error("a removed extension came back after a restart")
	}
}

// TestExampleManifestsValid: the manifests shipped in examples/extensions
// stay valid as the rules evolve.
func TestExampleManifestsValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "extensions", "*.json"))
	if err != nil || len(files) < 3 {
		t.Fatalf("example manifests: %v, %v", files, err)
	}
	e := &cliEnv{t: t, home: filepath.Join(t.TempDir(), "home"), addr: "127.0.0.1:1", agentHome: t.TempDir()}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if r := e.with(t).run("ext", "validate", f); r.code != exitOK || !strings.HasPrefix(r.stdout, "Valid: ") {
				t.Errorf("%s", r)
			}
		})
	}
}

// TestAdminExtensionsAPI: POST /admin/api/extensions registers at once and
// says what entered the registry; a second source whose ids collide (the
// same slug) loses them, journaled; DELETE /extensions/{source} is the
// owner's alone.
func TestAdminExtensionsAPI(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	pat, _ := enrolledAgent(t, td, "claude")
	manifest := func(source string) plexus.ExtensionManifest {
		return plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: source, Label: "GitHub helpers", Transport: plexus.TransportCLI,
			Capabilities: []plexus.ExtensionCapabilityDecl{{Name: "repo.list", Kind: plexus.KindCapability, Label: "List repos",
				Describe: "List repositories. Read-only.", Grants: []plexus.Verb{plexus.VerbRead}, Route: json.RawMessage(`{"bin": "gh", "args": ["repo", "list"]}`)}}}
	}
	var resp plexus.ExtensionRegisterResponse
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: manifest("mcp:github")}, &resp); st != http.StatusCreated ||
		!resp.OK || !slices.Equal(resp.Registered, []string{"mcp.github.repo.list"}) || resp.Revision == 0 {
		t.Fatalf("add: status %d, %+v", st, resp)
	}
	// Registering it again replaces it in place.
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: manifest("mcp:github")}, &resp); st != http.StatusCreated || !resp.OK {
		t.Fatalf("re-add: status %d, %+v", st, resp)
	}
	// Another source with the same slug: the first claimant keeps the id.
	resp = plexus.ExtensionRegisterResponse{}
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: manifest("mcp.github")}, &resp); st != http.StatusCreated ||
		len(resp.Registered) != 0 {
		t.Fatalf("colliding add: status %d, %+v", st, resp)
	}
	if e, _ := td.Registry().Entry("mcp.github.repo.list"); e.Source != "mcp:github" {
		t.Errorf("the id went to %s, not its first claimant", e.Source)
	}
	if rows := td.activity(t, journal.Filter{Type: "source.collision"}); len(rows) != 1 || rows[0].Target != "mcp.github" ||
		rows[0].Payload["capabilityId"] != "mcp.github.repo.list" {
		t.Errorf("source.collision rows = %+v", rows)
	}

	if st := td.call(t, "DELETE", "/extensions/mcp:github", bearer(pat), nil, nil); st != http.StatusUnauthorized {
		t.Errorf("an agent removed an extension: status %d", st)
	}
	if st := td.call(t, "DELETE", "/extensions/mcp:github", td.admin(), nil, nil); st != http.StatusOK {
		t.Errorf("owner remove: status %d", st)
	}
	if _, ok := td.Registry().Source("mcp:github"); ok {
		t.Error("still registered after DELETE /extensions/mcp:github")
	}
	if st := td.call(t, "DELETE", "/extensions/nope", td.admin(), nil, nil); st != http.StatusNotFound {
		t.Errorf("remove unknown: status %d", st)
	}
}

// TestCLIAgentRegister: the bundled client asks for a registration (exit 3,
// the pending id), an invalid manifest is refused before anything is sent,
// and the owner's plexus approve registers it.
func TestCLIAgentRegister(t *testing.T) {
	e, td := newCLIEnv(t)
	e.enroll("claude")
	bad := map[string]any{"manifest": plexus.ManifestVersion, "source": "broken", "label": "x", "transport": "mcp", "capabilities": []any{}}
	if r := e.run("agent", "register", writeManifest(t, bad)); r.code != exitError || !strings.Contains(r.stdout, "transport: mcp is not an extension transport") {
		t.Errorf("invalid: %s", r)
	}
	if rows := td.activity(t, journal.Filter{Type: "extension.requested"}); len(rows) != 0 {
		t.Errorf("an invalid manifest was sent: %+v", rows)
	}
	r := e.run("agent", "register", filepath.Join("..", "examples", "extensions", "mdfmt.json"))
	if r.code != exitPending || !strings.Contains(r.stdout, "Asked the owner to register the extension mdfmt (1 entries): pending pend_") {
		t.Fatalf("register: %s", r)
	}
	id := strings.TrimSuffix(r.stdout[strings.Index(r.stdout, "pend_"):], ".\n")
	e.ok("approve", id)
	if en, ok := td.Registry().Entry("mdfmt.file.format"); !ok || en.Provenance != plexus.ProvenanceExtension {
		t.Errorf("after approval: %+v, %v", en, ok)
	}
}
