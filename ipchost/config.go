package ipchost

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
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// maxFile bounds what is read of providers.json.
const maxFile = 1 << 20

// FileError is a problem with providers.json, or with one provider in it
// (Provider "" for the file as a whole). It never quotes an env value.
type FileError struct {
	Path     string
	Provider string
	Problem  string
}

func (e *FileError) Error() string {
	if e.Provider == "" {
		return fmt.Sprintf("%s: %s", e.Path, e.Problem)
	}
	return fmt.Sprintf("%s: provider %q: %s", e.Path, e.Provider, e.Problem)
}

// File is providers.json as read: its other top-level keys and each
// provider's entry kept as written ([scaffold.OwnerFile]), so that an edit
// by the CLI changes only the provider it names, and each entry checked.
type File struct {
	*scaffold.OwnerFile
	configs map[string]plexus.ProviderConfig // checked, defaults filled in
}

// Path is providers.json's path in PLEXUS_HOME home.
func Path(home string) string { return filepath.Join(home, scaffold.FileProviders) }

// ReadFile reads and checks path; a missing file declares nothing. Every
// entry must decode strictly (an unknown key is a typo until proven
// otherwise) and pass ipc.ValidateProvider; the first problem is returned.
func ReadFile(path string) (*File, error) {
	of, err := scaffold.ReadOwnerFile(path, "providers", maxFile)
	if err != nil {
		return nil, fileError(path, err)
	}
	f := &File{OwnerFile: of, configs: map[string]plexus.ProviderConfig{}}
	for _, id := range of.Names() {
		raw, _ := of.Entry(id)
		cfg, err := decodeProvider(path, id, raw)
		if err != nil {
			return nil, err
		}
		f.configs[id] = cfg
	}
	return f, nil
}

// fileError words a problem reading the file as a whole.
func fileError(path string, err error) error {
	var oe *scaffold.OwnerFileError
	var pe *fs.PathError
	switch {
	case errors.As(err, &oe) && oe.Problem == scaffold.ProblemTooLarge:
		return &FileError{Path: path, Problem: "over 1 MiB"}
	case errors.As(err, &oe) && oe.Problem == scaffold.ProblemNotObject:
		return &FileError{Path: path, Problem: "not a JSON object"}
	case errors.As(err, &oe):
		return &FileError{Path: path, Problem: `"providers" is not an object of provider ids`}
	case errors.As(err, &pe) && pe.Op == "open":
		return err
	}
	return fmt.Errorf("read %s: %w", path, err)
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
		return plexus.ProviderConfig{}, &FileError{Path: path, Provider: id, Problem: problem}
	}
	cfg, err := ipc.ValidateProvider(id, cfg)
	if err != nil {
		var ce *ipc.ConfigError
		if errors.As(err, &ce) {
			problem := ce.Problem
			if ce.Field != "" {
				problem = ce.Field + ": " + problem
			}
			return plexus.ProviderConfig{}, &FileError{Path: path, Provider: id, Problem: problem}
		}
		return plexus.ProviderConfig{}, err
	}
	return cfg, nil
}

// Configs returns the declared providers, checked, by id.
func (f *File) Configs() map[string]plexus.ProviderConfig { return maps.Clone(f.configs) }

// IDs lists the declared providers, sorted.
func (f *File) IDs() []string { return slices.Sorted(maps.Keys(f.configs)) }

// Set declares (or replaces) provider id; the error is an *ipc.ConfigError
// when cfg breaks a rule.
func (f *File) Set(id string, cfg plexus.ProviderConfig) error {
	cfg, err := ipc.ValidateProvider(id, cfg)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	f.Put(id, raw)
	f.configs[id] = cfg
	return nil
}

// Remove drops provider id and reports whether it was declared.
func (f *File) Remove(id string) bool {
	delete(f.configs, id)
	return f.OwnerFile.Remove(id)
}
