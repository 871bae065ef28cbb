package oauth

import (
	"testing"

	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/platform"
)

// NewSealedStore is the store a Manager puts over Options.Store, for the
// tests that read what a Manager stored, or seal a blob as it would.
func NewSealedStore(st Store, key []byte) (Store, error) { return newSealedStore(st, key) }

// testStore is a fresh home's secrets store and its token-key.
func testStore(t *testing.T) (*platform.Services, []byte) {
	t.Helper()
	home := plexustest.TempHome(t)
	return platform.New(platform.Options{Home: home.Dir}), home.TokenKey
}
