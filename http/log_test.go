package http

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-gw/plexus"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogNeverHoldsSecrets sends credentials in every place a client puts
// them and checks the request log has the request but none of them.
func TestLogNeverHoldsSecrets(t *testing.T) {
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api := &stubAPI{InvokeResp: plexus.InvokeResponse{OK: true}}
	ts := mustServe(t, api, Options{Logger: log})

	secrets := []string{"eyJSECRETTOKEN", "plx_live_SECRETKEY", "sess_SECRET", "plx_enroll_SECRET", "pend_SECRET", "SECRETINPUT"}
	hdr := map[string]string{
		"Authorization":            "Bearer eyJSECRETTOKEN",
		plexus.ConnectionKeyHeader: "plx_live_SECRETKEY",
		plexus.SessionHeader:       "sess_SECRET",
	}
	ts.do(t, "POST", "/invoke", hdr, `{"id":"cap.x","input":{"q":"SECRETINPUT"}}`)
	ts.do(t, "POST", "/agents/enroll", hdr, `{"code":"plx_enroll_SECRET"}`)
	ts.do(t, "GET", "/grants/status?pendingId=pend_SECRET", hdr, "")
	ts.do(t, "GET", "/nope", map[string]string{"Authorization": "Bearer eyJSECRETTOKEN"}, "")
	rawDo(t, ts.Addr, "GET", "/manifest", "evil.com", hdr, "")

	got := out.String()
	for _, want := range []string{"path=/invoke", "path=/grants/status", "status=200", "status=404", "status=403", "method=POST"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("log holds %q:\n%s", s, got)
		}
	}
}
