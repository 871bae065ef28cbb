package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// manifestEntries are entries whose JSON needs care: HTML-unsafe
// characters (kept as written), non-ASCII, U+2028, raw schemas and extras.
func manifestEntries(n int) []plexus.Entry {
	t := true
	out := make([]plexus.Entry, 0, n)
	for i := range n {
		out = append(out, plexus.Entry{
			ID: fmt.Sprintf("src.tool_%05d", i), Source: "src", Kind: plexus.KindCapability,
			Label:    "Tool <b>&amp;</b> \"quoted\" — Grüße 東京 \u2028 end",
			Describe: strings.Repeat("Reads a file & writes <html> to a path; ümlaut 🙂. ", 20),
			IO:       &plexus.IOSchema{Input: json.RawMessage(`{ "type": "object", "properties": { "p": {"type":"string","pattern":"<[a-z]+>"} } }`)},
			Grants:   []plexus.Verb{plexus.VerbRead}, Transport: "mcp",
			Standing: &t, Health: &plexus.Health{Status: plexus.HealthUnknown},
			Extras: map[string]any{"z": 1.5, "a": []any{"<x>", "é"}},
		})
	}
	return out
}

// TestManifestStreamedBytes checks the streamed handshake and manifest
// answers are byte for byte what encodeJSON writes for the whole answer,
// with the same status and headers: small (one write, Content-Length) and
// larger than the stream window (chunked).
func TestManifestStreamedBytes(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	for _, n := range []int{0, 1, 3, 200} {
		api.ManifestEntries = manifestEntries(n)
		entries := append([]plexus.Entry{}, api.ManifestEntries...)
		m := plexus.Manifest{SessionID: "sess_1", Revision: 7, Entries: entries}
		routes := []struct {
			name, method, path, body string
			whole                    any
		}{
			{"Handshake", "POST", "/link/handshake", `{"connectionKey":"k"}`, plexus.HandshakeResponse{SessionID: "sess_1", Manifest: m}},
			{"Manifest", "GET", "/manifest", "", plexus.ManifestResponse{Manifest: m}},
		}
		for _, rt := range routes {
			t.Run(fmt.Sprintf("%s/%d", rt.name, n), func(t *testing.T) {
				var want bytes.Buffer
				if err := encodeJSON(&want, rt.whole); err != nil {
					t.Fatal(err)
				}
				resp := ts.do(t, rt.method, rt.path, map[string]string{plexus.SessionHeader: "sess_1"}, rt.body)
				if resp.Status != 200 {
					t.Fatalf("status = %d, want 200; body %.300s", resp.Status, resp.Body)
				}
				if !bytes.Equal(resp.Body, want.Bytes()) {
					t.Errorf("body differs from encodeJSON (%d vs %d bytes):\n got %.400s\nwant %.400s", len(resp.Body), want.Len(), resp.Body, want.Bytes())
				}
				for k, v := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("%s = %q, want %q", k, got, v)
					}
				}
			})
		}
	}
}

// TestManifestEntryEncodeFailure checks an entry that cannot be encoded (a
// NaN in its extras) answers 500 internal_error while nothing was sent, and
// cuts the body when part of it was: never a shorter manifest that parses.
func TestManifestEntryEncodeFailure(t *testing.T) {
	bad := plexus.Entry{ID: "src.bad", Extras: map[string]any{"x": math.NaN()}}
	t.Run("BeforeAnyByte", func(t *testing.T) {
		api := &stubAPI{ManifestEntries: append(manifestEntries(2), bad)}
		ts := mustServe(t, api, Options{})
		resp := ts.do(t, "GET", "/manifest", map[string]string{plexus.SessionHeader: "sess_1"}, "")
		if resp.Status != 500 {
			t.Fatalf("status = %d, want 500", resp.Status)
		}
		if got := errorOf(t, resp); got.Code != plexus.CodeInternalError || got.Message != "internal error" {
			t.Errorf("error = %+v, want internal_error", got)
		}
	})
	t.Run("MidStream", func(t *testing.T) {
		api := &stubAPI{ManifestEntries: append(manifestEntries(100), bad)}
		ts := mustServe(t, api, Options{})
		req, err := nethttp.NewRequest("GET", "http://"+ts.Addr+"/manifest", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(plexus.SessionHeader, "sess_1")
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status = %d, want 200 (sent before the failure)", resp.StatusCode)
		}
		data, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("reading the body: err = %v, want io.ErrUnexpectedEOF (a cut body)", err)
		}
		if len(data) < streamBufSize {
			t.Errorf("got %d bytes, want the first window (%d) at least", len(data), streamBufSize)
		}
		if json.Valid(data) {
			t.Error("the cut body parses as JSON")
		}
	})
}
