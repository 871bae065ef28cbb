package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// Extensions the owner adds are owner-configured sources of kind
// [plexus.SourceKindExtension] whose config is the manifest: persisted,
// replayed at every start, journaled like any source.

// AddExtension registers m as an extension the owner added. One the owner
// added before under m's source is replaced in place (extension spec §10);
// replaced says so.
func (a *Admin) AddExtension(ctx context.Context, m plexus.ExtensionManifest) (sc plexus.SourceConfig, replaced bool, err error) {
	cfg, err := json.Marshal(m)
	if err != nil {
		return sc, false, err
	}
	sources, err := a.Sources(ctx)
	if err != nil {
		return sc, false, err
	}
	for _, s := range sources {
		if s.ID == m.Source && s.Kind == plexus.SourceKindExtension {
			replaced = true
		}
	}
	add := a.AddSource
	if replaced {
		add = a.ReplaceSource
	}
	sc, err = add(ctx, plexus.SourceConfig{ID: m.Source, Kind: plexus.SourceKindExtension, Config: cfg})
	return sc, replaced, err
}

// Extensions returns the manifests of the extensions the owner added.
func (a *Admin) Extensions(ctx context.Context) ([]plexus.ExtensionManifest, error) {
	sources, err := a.Sources(ctx)
	if err != nil {
		return nil, err
	}
	var ms []plexus.ExtensionManifest
	for _, s := range sources {
		if s.Kind != plexus.SourceKindExtension {
			continue
		}
		var m plexus.ExtensionManifest
		if err := json.Unmarshal(s.Config, &m); err != nil {
			return nil, fmt.Errorf("extension %s: stored manifest: %w", s.ID, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// NotExtensionError is [Admin.RemoveExtension] refusing a source that is
// not an extension the owner added: Kind is its kind, "" when there is no
// source ID.
type NotExtensionError struct{ ID, Kind string }

func (e *NotExtensionError) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("no extension %q (see: plexus ext list)", e.ID)
	}
	return fmt.Sprintf("%s is a %s source, not an extension", e.ID, e.Kind)
}

// RemoveExtension unregisters the extension id the owner added, revoking
// every grant of its entries.
func (a *Admin) RemoveExtension(ctx context.Context, id string) error {
	sources, err := a.Sources(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, s := range sources {
		if s.ID == id {
			if s.Kind != plexus.SourceKindExtension {
				return &NotExtensionError{ID: id, Kind: s.Kind}
			}
			found = true
		}
	}
	if !found {
		return &NotExtensionError{ID: id}
	}
	return a.RemoveSourcePurging(ctx, id)
}

// WriteExtensions prints the extensions the owner added as a table.
func WriteExtensions(w io.Writer, ms []plexus.ExtensionManifest) error {
	t := newTable(w)
	fmt.Fprintln(t, "SOURCE\tLABEL\tTRANSPORT\tENTRIES")
	for _, m := range ms {
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\n", m.Source, m.Label, m.Transport, len(m.Capabilities))
	}
	return t.Flush()
}
