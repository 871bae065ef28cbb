package hosts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// localHost is Claude Code set to edit dir's local-scope servers.
func localHost(t *testing.T, dir string) Host {
	t.Helper()
	h, _, err := mustLookup(t, "claude-code").Locate(Env{GOOS: "linux", Home: "/home/owner", ProjectDir: dir}, ScopeLocal)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLocalScope: the plexus entry goes into projects["<dir>"].mcpServers
// of ~/.claude.json and nowhere else: a project that has a section gets
// the entry beside its own servers, one that has none gets a section with
// only mcpServers, a file with no "projects" gets one. Every other byte of
// the file stays; the user scope's servers and the other projects' are
// untouched; removing the entry gives the file back (with the sections
// the upsert had to add left empty).
func TestLocalScope(t *testing.T) {
	const app = "/home/owner/src/app"
	withSection, _ := os.ReadFile(filepath.Join("testdata", "claude-code.json"))
	noProjects := "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"github\": {\"type\": \"http\", \"url\": \"https://api.githubcopilot.com/mcp/\"}\n  }\n}\n"
	noServers := "{\n  \"projects\": {\n    \"/home/owner/src/app\": {\n      \"allowedTools\": [],\n      \"hasTrustDialogAccepted\": false\n    }\n  }\n}\n"
	tests := []struct {
		name, dir, file string
		// added is what the upsert inserts, and after what; removed is the
		// file after the remove, "" for the file as it was.
		added, after, removed string
	}{
		{name: "ProjectHasServers", dir: app, file: string(withSection),
			after: "\"@example/db-mcp\"],\n          \"env\": {}\n        }",
			added: ",\n        \"plexus\": {\n          \"type\": \"stdio\",\n          \"command\": \"/usr/local/bin/plexus\",\n" +
				"          \"args\": [\"--home\", \"/home/owner/.plexus\", \"mcp\", \"serve\", \"--agent\", \"cursor\"]\n        }"},
		{name: "NewProject", dir: "/home/owner/src/other", file: string(withSection),
			after: "\"hasTrustDialogAccepted\": true\n    }",
			added: ",\n    \"/home/owner/src/other\": {\n      \"mcpServers\": {\n        \"plexus\": {\n          \"type\": \"stdio\",\n" +
				"          \"command\": \"/usr/local/bin/plexus\",\n          \"args\": [\"--home\", \"/home/owner/.plexus\", \"mcp\", \"serve\", \"--agent\", \"cursor\"]\n        }\n      }\n    }",
			removed: strings.Replace(string(withSection), "\"hasTrustDialogAccepted\": true\n    }",
				"\"hasTrustDialogAccepted\": true\n    },\n    \"/home/owner/src/other\": {\n      \"mcpServers\": {}\n    }", 1)},
		{name: "NoProjects", dir: app, file: noProjects,
			after: "\"https://api.githubcopilot.com/mcp/\"}\n  }",
			added: ",\n  \"projects\": {\n    \"/home/owner/src/app\": {\n      \"mcpServers\": {\n        \"plexus\": {\n          \"type\": \"stdio\",\n" +
				"          \"command\": \"/usr/local/bin/plexus\",\n          \"args\": [\"--home\", \"/home/owner/.plexus\", \"mcp\", \"serve\", \"--agent\", \"cursor\"]\n        }\n      }\n    }\n  }",
			removed: strings.Replace(noProjects, "}\n  }\n}", "}\n  },\n  \"projects\": {\n    \"/home/owner/src/app\": {\n      \"mcpServers\": {}\n    }\n  }\n}", 1)},
		{name: "SectionWithoutServers", dir: app, file: noServers,
			after: "\"hasTrustDialogAccepted\": false",
			added: ",\n      \"mcpServers\": {\n        \"plexus\": {\n          \"type\": \"stdio\",\n" +
				"          \"command\": \"/usr/local/bin/plexus\",\n          \"args\": [\"--home\", \"/home/owner/.plexus\", \"mcp\", \"serve\", \"--agent\", \"cursor\"]\n        }\n      }",
			removed: strings.Replace(noServers, "false\n", "false,\n      \"mcpServers\": {}\n", 1)},
		{name: "KeyNeedsQuoting", dir: "/home/owner/my \"app\"\t", file: noServers,
			after: "\"hasTrustDialogAccepted\": false\n    }",
			added: ",\n    \"/home/owner/my \\\"app\\\"\\t\": {\n      \"mcpServers\": {\n        \"plexus\": {\n          \"type\": \"stdio\",\n" +
				"          \"command\": \"/usr/local/bin/plexus\",\n          \"args\": [\"--home\", \"/home/owner/.plexus\", \"mcp\", \"serve\", \"--agent\", \"cursor\"]\n        }\n      }\n    }",
			removed: strings.Replace(noServers, "false\n    }", "false\n    },\n    \"/home/owner/my \\\"app\\\"\\t\": {\n      \"mcpServers\": {}\n    }", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".claude.json")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			user := mustRead(t, mustLookup(t, "claude-code"), path)
			userBefore, err := user.Servers()
			if err != nil {
				t.Fatal(err)
			}
			ed, err := mustRead(t, localHost(t, tt.dir), path).Upsert(stdio)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(tt.file, tt.after, tt.after+tt.added, 1)
			if want == tt.file {
				t.Fatalf("test bug: %q is not in the file", tt.after)
			}
			if got := apply(t, ed); string(got) != want {
				t.Fatalf("upsert (-want +got):\n%s", cmp.Diff(want, string(got)))
			}
			local := mustRead(t, localHost(t, tt.dir), path)
			if !local.Has(stdio) {
				t.Error("the local entry does not read back")
			}
			user = mustRead(t, mustLookup(t, "claude-code"), path)
			if _, ok := user.Plexus(); ok {
				t.Error("the user scope got a plexus entry")
			}
			if userAfter, _ := user.Servers(); !cmp.Equal(userBefore, userAfter) {
				t.Errorf("the user scope's servers changed: %+v", userAfter)
			}
			ed, err = local.Remove()
			if err != nil {
				t.Fatal(err)
			}
			removed := tt.file
			if tt.removed != "" {
				removed = tt.removed
			}
			if got := apply(t, ed); string(got) != removed {
				t.Errorf("remove (-want +got):\n%s", cmp.Diff(removed, string(got)))
			}
		})
	}
}

// TestLocalScopeServers: the local scope lists that project's servers
// only, and disconnecting it leaves a user-scope plexus entry alone.
func TestLocalScopeServers(t *testing.T) {
	path, orig := copyTestdata(t, "claude-code.json")
	servers, err := mustRead(t, localHost(t, "/home/owner/src/app"), path).Servers()
	if err != nil || len(servers) != 1 || servers[0].Name != "local-db" || servers[0].Entry.Command != "npx" {
		t.Fatalf("local servers = %+v, %v; want local-db", servers, err)
	}
	if s, err := mustRead(t, localHost(t, "/elsewhere"), path).Servers(); err != nil || len(s) != 0 {
		t.Errorf("servers of a project the file does not know = %+v, %v", s, err)
	}
	user := mustRead(t, mustLookup(t, "claude-code"), path)
	userWith := apply(t, must(user.Upsert(remote)))
	ed, err := mustRead(t, localHost(t, "/home/owner/src/app"), path).Remove()
	if err != nil {
		t.Fatal(err)
	}
	if ed.Changed() || !bytes.Equal(ed.New, userWith) {
		t.Errorf("removing a local entry that is not there changed the file:\n%s", ed.Diff())
	}
	if bytes.Equal(userWith, orig) {
		t.Fatal("the user upsert changed nothing")
	}
}

// TestLocalScopeMalformed: a "projects" or project section that is not an
// object is refused with its position, and nothing is written over it.
func TestLocalScopeMalformed(t *testing.T) {
	tests := []struct{ name, file string }{
		{"ProjectsArray", `{"projects": ["/home/owner/src/app"]}`},
		{"ProjectString", `{"projects": {"/home/owner/src/app": "x"}}`},
		{"ServersArray", `{"projects": {"/home/owner/src/app": {"mcpServers": []}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".claude.json")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Read(localHost(t, "/home/owner/src/app"), path)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != 1 || pe.Column == 0 {
				t.Fatalf("Read = %v, want a ParseError with a position", err)
			}
			// The user scope does not look there: it still reads.
			if _, err := Read(mustLookup(t, "claude-code"), path); err != nil {
				t.Errorf("user scope: %v", err)
			}
		})
	}
}

// TestLocateLocal: only Claude Code has a local scope; the others refuse
// it naming the scopes they have; the project must be absolute.
func TestLocateLocal(t *testing.T) {
	env := Env{GOOS: "linux", Home: "/home/o", ProjectDir: "/src/app/"}
	h, path, err := mustLookup(t, "claude-code").Locate(env, ScopeLocal)
	if err != nil || path != "/home/o/.claude.json" || h.LocalProject() != "/src/app" {
		t.Errorf("claude-code local = %q, %q, %v", path, h.LocalProject(), err)
	}
	if h, _, _ := mustLookup(t, "claude-code").Locate(env, ScopeUser); h.LocalProject() != "" {
		t.Error("the user scope edits a project's section")
	}
	for host, scopes := range map[string]string{"cursor": "user, project", "claude-desktop": "user", "codex": "user, project", "vscode": "user, project"} {
		_, _, err := mustLookup(t, host).Locate(env, ScopeLocal)
		if err == nil || !strings.Contains(err.Error(), "its scopes are "+scopes) {
			t.Errorf("%s --scope local: %v; want the scopes %s named", host, err, scopes)
		}
	}
	env.ProjectDir = "src/app"
	if _, _, err := mustLookup(t, "claude-code").Locate(env, ScopeLocal); err == nil {
		t.Error("a relative project was accepted")
	}
}
