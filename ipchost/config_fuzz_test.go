package ipchost_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// canary marks the private values withCanaries plants; no error may quote it.
const canary = "zqcanary"

// withCanaries re-encodes a config document with every value of the
// entries' private maps (env, headers) that is not a secret reference
// replaced by a distinct canary, or returns false when doc has no such
// value or already holds the canary.
func withCanaries(doc []byte, section string, private ...string) ([]byte, bool) {
	if strings.Contains(string(doc), canary) {
		return nil, false
	}
	var top map[string]any
	if json.Unmarshal(doc, &top) != nil {
		return nil, false
	}
	entries, _ := top[section].(map[string]any)
	n := 0
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		for _, field := range private {
			m, _ := entry[field].(map[string]any)
			for k, v := range m {
				if s, ok := v.(string); ok && !strings.Contains(s, "${secret:") {
					m[k] = fmt.Sprintf("%s%03dvalue", canary, n)
					n++
				}
			}
		}
	}
	if n == 0 {
		return nil, false
	}
	b, err := json.Marshal(top)
	return b, err == nil
}

// writeFuzzFile writes b as name in dir, replacing what an earlier input
// left there (a worker runs its inputs one at a time; a folder per input
// would cost more than the read under test).
func writeFuzzFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// topKeys lists the top-level keys of a JSON object document (none for a
// blank one), sorted: what a write must keep.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	var top map[string]json.RawMessage
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("not a JSON object: %v", err)
		}
	}
	return slices.Sorted(maps.Keys(top))
}

// withKey is keys with k added, sorted.
func withKey(keys []string, k string) []string {
	if !slices.Contains(keys, k) {
		keys = append(slices.Clone(keys), k)
	}
	slices.Sort(keys)
	return keys
}

// readBack reads the file at path.
func readBack(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzProvidersConfig reads a fuzzed providers.json as the daemon does.
// Properties: refusals are *ipchost.FileError naming the file; every
// accepted provider passes ipc.ValidateProvider unchanged (defaults already
// filled in); saving and reading back gives the same providers and keeps
// every other top-level key; no error quotes an env value.
func FuzzProvidersConfig(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"providers":null}`, `{"providers":[]}`, `{"providers":{"a":null}}`,
		`{"providers":{"notes":{"command":"/usr/bin/notes-provider","args":["--serve"],"env":{"NOTES_TOKEN":"private-value"},"restart":"always","max_frame_bytes":4194304}},"comment":"x"}`,
		`{"providers":{"a":{"command":"relative/path"},"B":{"command":"x"}}}`,
		`{"providers":{"a":{"command":"x","env":{"PLEXUS_KEY":"v","A=B":"c"}}}}`,
		`{"providers":{"a":{"command":"x","restart":"sometimes","extra":1}}}`,
		`{"providers":{"a":{"command":"x","max_frame_bytes":-1}}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := writeFuzzFile(t, dir, "providers.json", b)
		d, err := ipchost.ReadFile(path)
		if err != nil {
			var pe *ipchost.FileError
			if !errors.As(err, &pe) || pe.Path != path {
				t.Fatalf("ReadFile = %v (%T), want a FileError", err, err)
			}
		} else {
			for id, cfg := range d.Configs() {
				again, err := ipc.ValidateProvider(id, cfg)
				if err != nil || !cmp.Equal(again, cfg) {
					t.Fatalf("accepted provider %q does not validate as read: %v (%+v, then %+v)", id, err, cfg, again)
				}
			}
			if err := d.Save(); err != nil {
				t.Fatalf("save: %v", err)
			}
			back, err := ipchost.ReadFile(path)
			if err != nil {
				t.Fatalf("providers.json as saved does not read back: %v", err)
			}
			if diff := cmp.Diff(d.Configs(), back.Configs()); diff != "" {
				t.Fatalf("providers changed through a save (-before +after):\n%s", diff)
			}
			if !slices.Equal(topKeys(t, readBack(t, path)), withKey(topKeys(t, b), "providers")) {
				t.Fatalf("top-level keys changed through a save")
			}
		}
		if planted, ok := withCanaries(b, "providers", "env"); ok {
			if _, err := ipchost.ReadFile(writeFuzzFile(t, dir, "providers.json", planted)); err != nil && strings.Contains(err.Error(), canary) {
				t.Fatalf("an error quotes a private value: %v", err)
			}
		}
	})
}
