package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/registry"
)

// BenchmarkEntries10k measures what a handshake pays for the manifest of
// 10,000 entries: taking the entries (with health stamped) and encoding them.
// The design bar is < 50 ms for the whole manifest.
func BenchmarkEntries10k(b *testing.B) {
	r := registry.New(registry.Options{Sensitivity: sensitivity, DefaultWindow: window})
	input := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Folder-relative path."},"limit":{"type":"integer","minimum":1,"maximum":500}},"required":["path"],"additionalProperties":false}`)
	for s := range 10 {
		sid := fmt.Sprintf("src%d", s)
		es := make([]plexus.Entry, 1000)
		for i := range es {
			es[i] = capability(sid, fmt.Sprintf("%s.noun%04d.read", sid, i), read...)
			es[i].IO = &plexus.IOSchema{Input: input, Output: input}
		}
		if _, err := r.Add(context.Background(), newSource(sid, plexus.ProvenanceManaged, es...)); err != nil {
			b.Fatal(err)
		}
	}
	if n := r.Len(); n != 10000 {
		b.Fatalf("Len() = %d", n)
	}
	b.Run("Entries", func(b *testing.B) {
		for b.Loop() {
			if len(r.Entries()) != 10000 {
				b.Fatal("short")
			}
		}
	})
	b.Run("Manifest", func(b *testing.B) {
		for b.Loop() {
			m := plexus.Manifest{SessionID: "s", ExpiresAt: time.Now(), Revision: r.Revision(), Entries: r.Entries()}
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
