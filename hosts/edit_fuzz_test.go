package hosts

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzEdit: on any file that parses, an upsert leaves a file that parses,
// holds the entry and every other server as it was; removing it again
// leaves the other servers as they were.
func FuzzEdit(f *testing.F) {
	for _, hf := range hostFiles() {
		b, err := os.ReadFile(filepath.Join("testdata", hf.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(hf.host, b)
	}
	f.Add("vscode", []byte(`{"servers":{/*}*/"a":{"command":"x"},},}`))
	f.Add("cursor", []byte("{\"mcpServers\":{\"a\":{\"command\":\"x\"} // c\n}}"))
	f.Fuzz(func(t *testing.T, host string, src []byte) {
		h, err := Lookup(host)
		if err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Read(h, path)
		if err != nil {
			return
		}
		before, err := c.Servers()
		if err != nil {
			return
		}
		ed, err := c.Upsert(stdio)
		if err != nil {
			return // a shape Plexus leaves to the owner
		}
		c2 := mustReadBytes(t, h, path, ed.New)
		if !c2.Has(stdio) {
			t.Fatalf("upsert lost the entry:\n%s\n->\n%s", src, ed.New)
		}
		after, err := c2.Servers()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(without(after, EntryName), without(before, EntryName)) {
			t.Fatalf("upsert changed other servers:\n%s\n->\n%s", src, ed.New)
		}
		ed, err = c2.Remove()
		if err != nil {
			t.Fatal(err)
		}
		c3 := mustReadBytes(t, h, path, ed.New)
		final, err := c3.Servers()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(final, without(before, EntryName)) {
			t.Fatalf("remove changed other servers:\n%s\n->\n%s", src, ed.New)
		}
	})
}

func mustReadBytes(t *testing.T, h Host, path string, b []byte) *Config {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Read(h, path)
	if err != nil {
		t.Fatalf("the edited file does not read: %v\n%s", err, b)
	}
	return c
}

func without(servers []Server, name string) []Server {
	out := []Server{}
	for _, s := range servers {
		if s.Name != name {
			out = append(out, s)
		}
	}
	return out
}
