package http

import (
	nethttp "net/http"
	"net/http/httptest"
	"testing"

	"github.com/plexus-gw/plexus"
)

// BenchmarkManifest10k: the bytes a GET /manifest's answer of 10,000
// entries allocates in the edge, streamed (writeManifest) against encoded
// whole into one buffer (writeJSON of the collected manifest, as before).
func BenchmarkManifest10k(b *testing.B) {
	api := &stubAPI{ManifestEntries: manifestEntries(10000)}
	srv := New(api.backend(), Options{})
	m := stubAgents{api}.manifest()
	r := httptest.NewRequest("GET", "/manifest", nil)
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			srv.writeManifest(&discardWriter{h: nethttp.Header{}}, r, plexus.ManifestResponse{Manifest: m.Head}, m.Entries)
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			srv.writeJSON(&discardWriter{h: nethttp.Header{}}, r, nethttp.StatusOK, plexus.ManifestResponse{Manifest: m.Collect()})
		}
	})
}
