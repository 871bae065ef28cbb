package main

// providers.json: the tool providers the owner declares, launched by the
// daemon and connected back over the ipc socket.
//
//	{"providers": {"<id>": {"command": "...", "args": [...], "env": {...},
//	                        "restart": "on-failure", "max_frame_bytes": 4194304}}}

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// providersFile is the name of the providers' file under PLEXUS_HOME.
const providersFile = "providers.json"

// maxProvidersFile bounds what is read of providers.json.
const maxProvidersFile = 1 << 20

// providersFileError is a problem with providers.json, or with one provider
// in it (Provider "" for the file as a whole). It never quotes an env value.
type providersFileError struct {
	Path     string
	Provider string
	Problem  string
}

func (e *providersFileError) Error() string {
	if e.Provider == "" {
		return fmt.Sprintf("%s: %s", e.Path, e.Problem)
	}
	return fmt.Sprintf("%s: provider %q: %s", e.Path, e.Provider, e.Problem)
}

// providersDoc is providers.json as read: its other top-level keys and each
// provider's entry kept as written, so that an edit by the CLI changes only
// the provider it names.
type providersDoc struct {
	path      string
	top       map[string]json.RawMessage
	providers map[string]json.RawMessage
	configs   map[string]plexus.ProviderConfig // checked, defaults filled in
}

func providersPath(home string) string { return filepath.Join(home, providersFile) }

// readProviders reads and checks path; a missing file declares nothing.
// Every entry must decode strictly (an unknown key is a typo until proven
// otherwise) and pass ipc.ValidateProvider; the first problem is returned.
func readProviders(path string) (*providersDoc, error) {
	d := &providersDoc{path: path, top: map[string]json.RawMessage{}, providers: map[string]json.RawMessage{},
		configs: map[string]plexus.ProviderConfig{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProvidersFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxProvidersFile {
		return nil, &providersFileError{Path: path, Problem: "over 1 MiB"}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, &d.top); err != nil || d.top == nil {
		return nil, &providersFileError{Path: path, Problem: "not a JSON object"}
	}
	if raw, ok := d.top["providers"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &d.providers); err != nil {
			return nil, &providersFileError{Path: path, Problem: `"providers" is not an object of provider ids`}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(d.providers)) {
		cfg, err := decodeProvider(path, id, d.providers[id])
		if err != nil {
			return nil, err
		}
		d.configs[id] = cfg
	}
	return d, nil
}

// decodeProvider decodes and checks one entry.
func decodeProvider(path, id string, raw json.RawMessage) (plexus.ProviderConfig, error) {
	var cfg plexus.ProviderConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		problem := "not an object of command, args, env, restart, max_frame_bytes"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			problem = fmt.Sprintf("%s: wrong type, want %s", te.Field, te.Type)
		} else if msg := err.Error(); len(msg) > 0 && bytes.Contains([]byte(msg), []byte("unknown field")) {
			problem = msg[len("json: "):]
		}
		return plexus.ProviderConfig{}, &providersFileError{Path: path, Provider: id, Problem: problem}
	}
	cfg, err := ipc.ValidateProvider(id, cfg)
	if err != nil {
		var ce *ipc.ConfigError
		if errors.As(err, &ce) {
			problem := ce.Problem
			if ce.Field != "" {
				problem = ce.Field + ": " + problem
			}
			return plexus.ProviderConfig{}, &providersFileError{Path: path, Provider: id, Problem: problem}
		}
		return plexus.ProviderConfig{}, err
	}
	return cfg, nil
}

// set declares (or replaces) provider id.
func (d *providersDoc) set(id string, cfg plexus.ProviderConfig) error {
	cfg, err := ipc.ValidateProvider(id, cfg)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	d.providers[id] = raw
	d.configs[id] = cfg
	return nil
}

// remove drops provider id and reports whether it was declared.
func (d *providersDoc) remove(id string) bool {
	_, ok := d.providers[id]
	delete(d.providers, id)
	delete(d.configs, id)
	return ok
}

// save writes the document atomically (a temp file renamed over it),
// 0600: env values may be private.
func (d *providersDoc) save() error {
	pb, err := json.Marshal(d.providers)
	if err != nil {
		return err
	}
	d.top["providers"] = pb
	b, err := json.MarshalIndent(d.top, "", "  ")
	if err != nil {
		return err
	}
	return platform.WriteFileAtomic(d.path, append(b, '\n'), platform.WriteOptions{Mode: 0o600})
}
