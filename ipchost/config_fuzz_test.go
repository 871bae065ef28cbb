package ipchost_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/transports/ipc"
)

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
		path := plexustest.WriteFile(t, dir, "providers.json", b)
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
			if !slices.Equal(plexustest.TopKeys(t, plexustest.ReadBack(t, path)), plexustest.WithKey(plexustest.TopKeys(t, b), "providers")) {
				t.Fatalf("top-level keys changed through a save")
			}
		}
		if planted, ok := plexustest.WithCanaries(b, "providers", "env"); ok {
			if _, err := ipchost.ReadFile(plexustest.WriteFile(t, dir, "providers.json", planted)); err != nil && strings.Contains(err.Error(), plexustest.Canary) {
				t.Fatalf("an error quotes a private value: %v", err)
			}
		}
	})
}
