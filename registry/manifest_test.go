package registry

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

func loadManifest(t *testing.T, name string) plexus.ExtensionManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var m plexus.ExtensionManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestValidateManifestSpecExamples: the spec's three worked manifests are
// valid, offline and against a gateway that knows nothing more.
func TestValidateManifestSpecExamples(t *testing.T) {
	none := func(string) (plexus.Entry, bool) { return plexus.Entry{}, false }
	for _, name := range []string{"obsidian.json", "prettier.json", "notes-workflow.json"} {
		t.Run(name, func(t *testing.T) {
			m := loadManifest(t, name)
			if err := ValidateManifest(m, nil); err != nil {
				t.Errorf("offline: %v", err)
			}
			if err := ValidateManifest(m, none); err != nil {
				t.Errorf("against a gateway: %v", err)
			}
		})
	}
}

// TestValidateManifestRules breaks each rule of §8 and the §13 checklist
// once, on a valid manifest, and wants exactly that field named.
func TestValidateManifestRules(t *testing.T) {
	present := func(id string) (plexus.Entry, bool) {
		switch id {
		case "portal.notes.read":
			return plexus.Entry{ID: id, Kind: plexus.KindCapability, Grants: []plexus.Verb{plexus.VerbRead}}, true
		case "portal.notes.guide":
			return plexus.Entry{ID: id, Kind: plexus.KindSkill, Grants: []plexus.Verb{}}, true
		}
		return plexus.Entry{}, false
	}
	tests := []struct {
		name   string
		base   string
		edit   func(m *plexus.ExtensionManifest)
		fields []string // every field the problems name, in order
	}{
		{"WrongVersion", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Manifest = "plexus-extension/0.2" }, []string{"manifest"}},
		{"NoSource", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Source = "" }, []string{"source"}},
		{"BadSource", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Source = "Obsidian Vault" }, []string{"source"}},
		{"NoLabel", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Label = " " }, []string{"label"}},
		{"NoCapabilities", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Capabilities = nil }, []string{"capabilities"}},
		{"DuplicateName", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[1].Name = "vault.read" },
			// the workflow's member notes.vault.append no longer exists either
			[]string{"capabilities[1].name", "capabilities[2].members[1].id"}},
		{"NameNotNounVerb", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Name = "format" }, []string{"capabilities[0].name"}},
		{"NameUpperCase", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Name = "Code.Format" }, []string{"capabilities[0].name"}},
		{"MCPTransport", "prettier.json", func(m *plexus.ExtensionManifest) { m.Transport = plexus.TransportMCP },
			[]string{"transport", "capabilities[0].transport"}[:1]},
		{"UnknownDeclTransport", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Transport = "grpc" },
			[]string{"capabilities[0].transport"}},
		{"UnknownKind", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Kind = "tool" }, []string{"capabilities[0].kind"}},
		{"NoDescribe", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Describe = "" }, []string{"capabilities[0].describe"}},
		{"UnknownVerb", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Grants = []plexus.Verb{"delete"} },
			[]string{"capabilities[0].grants[0]"}},
		{"CapabilityNoGrants", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Grants = []plexus.Verb{} },
			[]string{"capabilities[0].grants"}},
		{"SkillNoBody", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Capabilities[1].Body = nil }, []string{"capabilities[1].body"}},
		{"SkillWithGrants", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Capabilities[1].Grants = []plexus.Verb{plexus.VerbRead} },
			[]string{"capabilities[1].grants"}},
		{"SkillOverWire", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Capabilities[1].Transport = plexus.TransportCLI },
			[]string{"capabilities[1].transport"}},
		{"SkillWithIO", "obsidian.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[1].IO = &plexus.IOSchema{Input: json.RawMessage(`{"type":"object"}`)}
		}, []string{"capabilities[1].io"}},
		{"WorkflowNoMembers", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[2].Members = nil },
			[]string{"capabilities[2].members"}},
		{"WorkflowDanglingMember", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[2].Members[0].ID = "notes.vault.delete" },
			[]string{"capabilities[2].members[0].id"}},
		{"WorkflowMemberVerbsExceed", "notes-workflow.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[2].Members[0].Verbs = []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}
		}, []string{"capabilities[2].members[0].verbs"}},
		{"WorkflowPresentMember", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[2].Members[0].ID = "portal.notes.read" }, nil},
		{"WorkflowSkillMember", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[2].Members[0].ID = "portal.notes.guide" },
			[]string{"capabilities[2].members[0].id"}},
		{"WorkflowSelfMember", "notes-workflow.json", func(m *plexus.ExtensionManifest) { m.Capabilities[2].Members[0].ID = "notes.daily.log" },
			[]string{"capabilities[2].members[0].id"}},
		{"InvalidInputSchema", "prettier.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].IO.Input = json.RawMessage(`{"type": "objekt"}`)
		}, []string{"capabilities[0].io.input"}},
		{"InputSchemaNotJSON", "prettier.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].IO.Input = json.RawMessage(`{"type": `)
		}, []string{"capabilities[0].io.input"}},
		{"InputSchemaRemoteRef", "prettier.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].IO.Input = json.RawMessage(`{"$ref": "file:///etc/passwd"}`)
		}, []string{"capabilities[0].io.input"}},
		{"UndeclaredSecret", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Secrets = nil }, []string{"capabilities[0].route.secret.name"}},
		{"HeaderSecretWithoutName", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Secrets[0].Attach = plexus.AttachHeader },
			[]string{"secrets[0].as"}},
		{"BadAttach", "obsidian.json", func(m *plexus.ExtensionManifest) { m.Secrets[0].Attach = "cookie" }, []string{"secrets[0].attach"}},
		{"AttachUnknownSkill", "obsidian.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"method": "GET", "pathTemplate": "/x", "attachSkills": ["vault.howto"]}`)
		}, []string{"capabilities[0].route.attachSkills[0]"}},
		{"AttachNonSkill", "notes-workflow.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"bin": "notescli", "args": ["read", "{path}"], "attachSkills": ["vault.append"]}`)
		}, []string{"capabilities[0].route.attachSkills[0]"}},
		{"RouteNotObject", "prettier.json", func(m *plexus.ExtensionManifest) { m.Capabilities[0].Route = json.RawMessage(`["prettier"]`) },
			[]string{"capabilities[0].route"}},
		// A route read otherwise by its transport than by the gateway.
		{"RouteKeyCaseVariant", "prettier.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"bin": "/bin/sh", "args": ["-c", "{cmd}"], "Bin": "ls", "Args": ["x"]}`)
		}, []string{"capabilities[0].route.Args"}},
		{"RouteKeyMistyped", "notes-workflow.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"bin": "notescli", "args": "read {path}"}`)
		}, []string{"capabilities[0].route.args"}},
		{"RouteKeyMistypedLocalREST", "obsidian.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"method": "GET", "pathTemplate": 7}`)
		}, []string{"capabilities[0].route.pathTemplate"}},
		{"RouteKeyOfOtherTransportIgnored", "prettier.json", func(m *plexus.ExtensionManifest) {
			m.Capabilities[0].Route = json.RawMessage(`{"bin": "prettier", "args": ["{file}"], "method": 1, "Path": 2}`)
		}, nil},
		{"BadServicePort", "obsidian.json", func(m *plexus.ExtensionManifest) { m.ServiceHint.DefaultPort = 70000 },
			[]string{"serviceHint.defaultPort"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadManifest(t, tt.base)
			tt.edit(&m)
			err := ValidateManifest(m, present)
			var got []string
			var me *ManifestError
			if errors.As(err, &me) {
				for _, p := range me.Problems {
					got = append(got, p.Field)
					if p.Problem == "" || p.Fix == "" {
						t.Errorf("%s: a problem says what and how to fix it: %+v", p.Field, p)
					}
				}
			} else if err != nil {
				t.Fatalf("error is %T, want *ManifestError: %v", err, err)
			}
			if diff := cmp.Diff(tt.fields, got); diff != "" {
				t.Errorf("fields named (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// TestValidateManifestOffline: without a gateway, members from elsewhere
// are not judged, and Unresolved lists them.
func TestValidateManifestOffline(t *testing.T) {
	m := loadManifest(t, "notes-workflow.json")
	m.Capabilities[2].Members[0].ID = "portal.notes.read"
	if err := ValidateManifest(m, nil); err != nil {
		t.Fatalf("offline: %v", err)
	}
	if got := Unresolved(m, nil); !slices.Equal(got, []string{"capabilities[2].members[0]: portal.notes.read"}) {
		t.Errorf("Unresolved = %v", got)
	}
}

// TestExtensionSourceEntries: the materialized entries carry the derived
// ids, the skill back-link, the default transport, and a route that holds
// the declaration's route with the manifest's hint and secret references
// but no secret value (a manifest has none).
func TestExtensionSourceEntries(t *testing.T) {
	m := loadManifest(t, "obsidian.json")
	m.Source = "obsidian:work"
	src, err := NewExtensionSource(m, plexus.ProvenanceManaged, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.ID() != "obsidian:work" || src.Provenance() != plexus.ProvenanceManaged {
		t.Errorf("id %q provenance %q", src.ID(), src.Provenance())
	}
	entries, err := src.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].ID != "obsidian.work.vault.read" || entries[1].ID != "obsidian.work.vault.how-to-cite" {
		t.Fatalf("entries = %+v", entries)
	}
	read, skill := entries[0], entries[1]
	if diff := cmp.Diff([]plexus.SkillRef{{ID: "obsidian.work.vault.how-to-cite", Label: "How to cite an Obsidian vault"}}, read.Skills); diff != "" {
		t.Errorf("skill back-link (-want +got):\n%s", diff)
	}
	if read.Transport != plexus.TransportLocalREST || skill.Transport != plexus.TransportSkill || len(skill.Grants) != 0 || skill.Grants == nil {
		t.Errorf("transports %q/%q, skill grants %#v", read.Transport, skill.Transport, skill.Grants)
	}
	var r plexus.ExtensionRoute
	if err := json.Unmarshal(read.Route, &r); err != nil {
		t.Fatal(err)
	}
	if r.ServiceHint == nil || r.ServiceHint.DefaultPort != 27123 || len(r.Secrets) != 1 || r.Secrets[0].Name != "obsidian-rest-api-key" ||
		!strings.Contains(string(r.Decl), `"pathTemplate":"/search/simple"`) {
		t.Errorf("route = %s", read.Route)
	}
	if out, _ := json.Marshal(read); strings.Contains(string(out), "pathTemplate") {
		t.Errorf("the route leaked into the entry's JSON: %s", out)
	}
}

// TestExtensionSourceRefusesInvalid: nothing is materialized from an
// invalid manifest.
func TestExtensionSourceRefusesInvalid(t *testing.T) {
	m := loadManifest(t, "prettier.json")
	m.Transport = plexus.TransportMCP
	if _, err := NewExtensionSource(m, plexus.ProvenanceManaged, nil, nil); err == nil {
		t.Fatal("an mcp-transport manifest was materialized")
	}
}

// TestParseManifest: strict decoding names the field at fault.
func TestParseManifest(t *testing.T) {
	for _, tt := range []struct{ name, in, field string }{
		{"UnknownKey", `{"manifest": "plexus-extension/0.1", "capabilites": []}`, "capabilites"},
		{"WrongType", `{"manifest": "plexus-extension/0.1", "capabilities": {"a": 1}}`, "capabilities"},
		{"NotJSON", `{"manifest": `, "manifest"},
		{"TwoValues", `{} {}`, "manifest"},
		{"Oversize", `{"label": "` + strings.Repeat("x", MaxManifestSize) + `"}`, "manifest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.in))
			var me *ManifestError
			if !errors.As(err, &me) || len(me.Problems) != 1 || me.Problems[0].Field != tt.field {
				t.Errorf("ParseManifest = %v, want one problem naming %q", err, tt.field)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join("testdata", "obsidian.json"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseManifest(b); err != nil || m.Source != "obsidian" || len(m.Capabilities) != 2 {
		t.Errorf("ParseManifest(obsidian.json) = %+v, %v", m, err)
	}
}
