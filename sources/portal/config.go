package portal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plexus-gw/plexus"
)

// OwnerSource is the source the owner adds to expose the folder at path
// under alias, and its Config: the path made absolute (relative to the
// caller's folder, which the daemon does not share) and a directory.
func OwnerSource(path, alias string) (plexus.SourceConfig, Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return plexus.SourceConfig{}, Config{}, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return plexus.SourceConfig{}, Config{}, err
	} else if !fi.IsDir() {
		return plexus.SourceConfig{}, Config{}, fmt.Errorf("%s is not a directory", abs)
	}
	pc := Config{Path: abs, Alias: alias}
	cfg, err := json.Marshal(pc)
	if err != nil {
		return plexus.SourceConfig{}, Config{}, err
	}
	return plexus.SourceConfig{ID: SourcePrefix + alias, Kind: Kind, Config: cfg}, pc, nil
}

// View is one portal as `plexus portal list --json` prints it.
type View struct {
	ID    string `json:"id"`
	Alias string `json:"alias"`
	Path  string `json:"path"`
}

// Views are the portals among sources. One whose config cannot be read
// still lists, by its id.
func Views(sources []plexus.SourceConfig) []View {
	portals := []View{}
	for _, s := range sources {
		if s.Kind != Kind {
			continue
		}
		var pc Config
		if err := json.Unmarshal(s.Config, &pc); err != nil {
			pc = Config{}
		}
		portals = append(portals, View{ID: s.ID, Alias: pc.Alias, Path: pc.Path})
	}
	return portals
}
