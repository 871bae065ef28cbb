package hosts

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestReachEntry(t *testing.T) {
	tests := []struct {
		name  string
		reach Reach
		pat   string
		want  Entry
	}{
		{"StdioDefaultAddr", Reach{Addr: "127.0.0.1:7077", DefaultAddr: "127.0.0.1:7077", Binary: "/bin/plexus", Home: "/h"}, "plx_agent_x",
			Entry{Command: "/bin/plexus", Args: []string{"--home", "/h", "mcp", "serve", "--agent", "cc"}}},
		{"StdioOtherAddr", Reach{Addr: "127.0.0.1:9", DefaultAddr: "127.0.0.1:7077", Binary: "/bin/plexus", Home: "/h"}, "",
			Entry{Command: "/bin/plexus", Args: []string{"--home", "/h", "--addr", "127.0.0.1:9", "mcp", "serve", "--agent", "cc"}}},
		{"HTTP", Reach{HTTP: true, Addr: "127.0.0.1:9"}, "plx_agent_x",
			Entry{URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer plx_agent_x"}}},
		{"HTTPNotEnrolled", Reach{HTTP: true, Addr: "127.0.0.1:9"}, "",
			Entry{URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer " + patPlaceholder}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.reach.Entry("cc", tt.pat)); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

// connection is a Connection of cursor's file at path, launching Plexus.
func connection(t *testing.T, path, pat string) Connection {
	t.Helper()
	return Connection{Config: mustRead(t, mustLookup(t, "cursor"), path), Agent: "cursor", CredDir: "/h/clients/cursor", PAT: pat,
		Reach: Reach{Addr: "127.0.0.1:7077", DefaultAddr: "127.0.0.1:7077", Binary: "/bin/plexus", Home: "/h"}}
}

func TestConnect(t *testing.T) {
	ctx := context.Background()
	t.Run("DryRunWritesNothing", func(t *testing.T) {
		path, before := copyTestdata(t, "cursor.json")
		c := connection(t, path, "")
		c.DryRun = true // and no Enroll: calling it would panic
		var out bytes.Buffer
		if err := Connect(ctx, &out, c, (*Config).Upsert); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^\+\s+"plexus": \{$`).MatchString(out.String()) || !strings.Contains(out.String(), "Dry run: no agent enrolled, nothing written.") {
			t.Errorf("output:\n%s", out.String())
		}
		assertFile(t, path, before)
	})
	t.Run("EnrolledAgentOnlyTheFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mcp.json") // no file yet
		var out bytes.Buffer
		if err := Connect(ctx, &out, connection(t, path, "plx_agent_stored"), (*Config).Upsert); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`Agent "cursor" is already enrolled`, "Wrote " + path + " (a new file, mode 0600).", `Cursor reaches Plexus as agent "cursor"`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		if p, ok := mustRead(t, mustLookup(t, "cursor"), path).Plexus(); !ok || p.Entry.Command != "/bin/plexus" {
			t.Errorf("plexus entry = %+v, %v", p, ok)
		}
		out.Reset()
		if err := Connect(ctx, &out, connection(t, path, "plx_agent_stored"), (*Config).Upsert); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Nothing to do.") {
			t.Errorf("second connect:\n%s", out.String())
		}
	})
	t.Run("EnrollsThenWritesHTTP", func(t *testing.T) {
		path, _ := copyTestdata(t, "cursor.json")
		c := connection(t, path, "")
		c.Reach.HTTP = true
		c.Enroll = func(context.Context) (string, []plexus.Declined, error) {
			return "plx_agent_new", []plexus.Declined{{ID: "notes.write", Reason: "unknown capability"}}, nil
		}
		var out bytes.Buffer
		if err := Connect(ctx, &out, c, (*Config).Upsert); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "plx_agent_new") {
			t.Errorf("the PAT reached the output:\n%s", out.String())
		}
		for _, want := range []string{"Enrolled agent", "Declined grant notes.write: unknown capability", "The agent's PAT now sits in " + path} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		if p, _ := mustRead(t, mustLookup(t, "cursor"), path).Plexus(); p.Entry.Headers["Authorization"] != "Bearer plx_agent_new" {
			t.Errorf("entry = %+v, want the enrolled PAT", p.Entry)
		}
	})
	t.Run("EnrollFailsWritesNothing", func(t *testing.T) {
		path, before := copyTestdata(t, "cursor.json")
		c := connection(t, path, "")
		refused := errors.New("refused")
		c.Enroll = func(context.Context) (string, []plexus.Declined, error) { return "", nil, refused }
		if err := Connect(ctx, &bytes.Buffer{}, c, (*Config).Upsert); !errors.Is(err, refused) {
			t.Fatalf("err = %v, want the enrollment's", err)
		}
		assertFile(t, path, before)
	})
}

func TestDisconnect(t *testing.T) {
	path, before := copyTestdata(t, "cursor.json")
	h := mustLookup(t, "cursor")
	connected := apply(t, must(mustRead(t, h, path).Upsert(remote)))
	var out bytes.Buffer
	if err := Disconnect(&out, mustRead(t, h, path), "plx_agent_example", true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "plx_agent_example") || !regexp.MustCompile(`(?m)^-\s+"plexus": \{$`).MatchString(out.String()) {
		t.Errorf("dry run output:\n%s", out.String())
	}
	assertFile(t, path, connected)
	out.Reset()
	if err := Disconnect(&out, mustRead(t, h, path), "", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(the file as it was: "+path+".plexus-backup") {
		t.Errorf("output:\n%s", out.String())
	}
	assertFile(t, path, before)
	out.Reset()
	if err := Disconnect(&out, mustRead(t, h, path), "", false); err != nil {
		t.Fatal(err)
	}
	if out.String() != path+" has no plexus entry.\n" {
		t.Errorf("second disconnect: %q", out.String())
	}
}

func must(ed *Edit, err error) *Edit {
	if err != nil {
		panic(err)
	}
	return ed
}

func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n%s\nwant:\n%s", path, got, want)
	}
}
