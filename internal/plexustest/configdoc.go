package plexustest

// Helpers for tests and fuzz targets of the owner's JSON config files
// (mcp.json, providers.json): what their readers refuse, what a write keeps,
// and that no error quotes a private value.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Canary marks the private values [WithCanaries] plants; no error may quote it.
const Canary = "zqcanary"

// WithCanaries re-encodes a config document with every value of the
// entries' private maps (env, headers) that is not a secret reference
// replaced by a distinct Canary, or returns false when doc has no such
// value or already holds the canary.
func WithCanaries(doc []byte, section string, private ...string) ([]byte, bool) {
	if strings.Contains(string(doc), Canary) {
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
					m[k] = fmt.Sprintf("%s%03dvalue", Canary, n)
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

// WriteFile writes b as name in dir, replacing what an earlier input
// left there (a worker runs its inputs one at a time; a folder per input
// would cost more than the read under test).
func WriteFile(tb testing.TB, dir, name string, b []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TopKeys lists the top-level keys of a JSON object document (none for a
// blank one), sorted: what a write must keep.
func TopKeys(tb testing.TB, b []byte) []string {
	tb.Helper()
	var top map[string]json.RawMessage
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &top); err != nil {
			tb.Fatalf("not a JSON object: %v", err)
		}
	}
	return slices.Sorted(maps.Keys(top))
}

// WithKey is keys with k added, sorted.
func WithKey(keys []string, k string) []string {
	if !slices.Contains(keys, k) {
		keys = append(slices.Clone(keys), k)
	}
	slices.Sort(keys)
	return keys
}

// ReadBack reads the file at path.
func ReadBack(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
