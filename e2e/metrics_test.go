package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
)

// testScrapeToken is the scrape token the metrics suite writes into the
// home's scrape-token file.
const testScrapeToken = "scrape-0123456789abcdef0123456789abcdef"

// startScrapedDaemon starts a daemon whose home's scrape-token file holds
// testScrapeToken.
func startScrapedDaemon(t *testing.T) *testDaemon {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	writeScrapeToken(t, home, testScrapeToken)
	return startTestDaemon(t, daemon.Options{Home: home})
}

func writeScrapeToken(t *testing.T, home, tok string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, scaffold.FileScrapeToken), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A new token in the scrape-token file works at the next scrape, without a
// restart, and the old one stops working; a file gone bad admits nothing.
func TestMetricsScrapeTokenChanged(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	writeScrapeToken(t, home, testScrapeToken)
	td := startTestDaemon(t, daemon.Options{Home: home})
	scrape(t, td, bearer(testScrapeToken))
	const next = "scrape-fedcba9876543210fedcba9876543210"
	writeScrapeToken(t, home, next)
	scrape(t, td, bearer(next))
	st, raw := td.raw(t, http.MethodGet, "/metrics", bearer(testScrapeToken), nil)
	wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeUnauthorized)
	if err := os.Chmod(filepath.Join(home, scaffold.FileScrapeToken), 0o644); err != nil {
		t.Fatal(err)
	}
	st, raw = td.raw(t, http.MethodGet, "/metrics", bearer(next), nil)
	wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeUnauthorized)
	if err := os.Remove(filepath.Join(home, scaffold.FileScrapeToken)); err != nil {
		t.Fatal(err)
	}
	st, raw = td.raw(t, http.MethodGet, "/metrics", bearer(next), nil)
	wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeUnauthorized)
	scrape(t, td, td.admin())
}

// scrape reads /metrics with hdr and parses the exposition.
func scrape(t *testing.T, td *testDaemon, hdr map[string]string) map[string]*dto.MetricFamily {
	t.Helper()
	st, raw := td.raw(t, http.MethodGet, "/metrics", hdr, nil)
	if st != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %s", st, raw)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// metricValue is the value of the series of family name whose labels
// include want (a counter's or gauge's value, a histogram's count); -1
// when there is no such series.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return -1
}

// TestMetricsScrape: /metrics counts what real calls did: calls by
// capability and outcome with their latencies, the token minted and the
// approval that granted it, a pending decision, an open /events stream,
// the journal's commits and the sources' health; a made-up capability id
// is counted as "unknown", never as a series of its own.
func TestMetricsScrape(t *testing.T) {
	td := startScrapedDaemon(t)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	scraper := bearer(testScrapeToken)
	before := scrape(t, td, scraper)
	if v := metricValue(before, "plexus_calls_total", map[string]string{"capability": "test.echo.read"}); v != -1 {
		t.Fatalf("calls before any call = %v, want no series", v)
	}

	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	for range 3 {
		if _, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "hi"}}); !resp.OK {
			t.Fatalf("invoke: %s", raw)
		}
	}
	td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"n": 1}})
	td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "made.up.capability-4711", Input: map[string]any{}})
	grantPending(t, td, sid, map[string]any{"test.echo.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	td.openEvents(t, sid, "")

	fams := scrape(t, td, scraper)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"plexus_calls_total", map[string]string{"capability": "test.echo.read", "outcome": "ok", "via": "http"}, 3},
		{"plexus_calls_total", map[string]string{"capability": "test.echo.read", "outcome": string(plexus.CodeSchemaValidationFailed)}, 1},
		{"plexus_calls_total", map[string]string{"capability": "unknown"}, 1},
		{"plexus_call_duration_seconds", map[string]string{"capability": "test.echo.read", "via": "http"}, 4},
		{"plexus_tokens_minted_total", nil, 1},
		{"plexus_decisions_total", map[string]string{"kind": "grant", "outcome": "approved", "via": "system"}, 1},
		{"plexus_pending_decisions", nil, 1},
		{"plexus_event_streams_open", nil, 1},
		{"plexus_source_health", map[string]string{"source": "test", "status": "ok"}, 1},
	} {
		if got := metricValue(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := metricValue(fams, "plexus_journal_commit_duration_seconds", map[string]string{"durable": "false"}); got < 1 {
		t.Errorf("journal commits observed = %v, want some", got)
	}
	if f := fams["plexus_calls_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "made.up") {
					t.Errorf("a made-up capability id became a label: %v", m)
				}
			}
		}
	}
}

// TestMetricsScrapeRefused: /metrics answers the scrape token and the
// connection-key only, and only behind the Host/Origin guard; an agent's
// PAT or token, a wrong token or key, or no credential are refused
// without a byte of the exposition.
func TestMetricsScrapeRefused(t *testing.T) {
	td := startScrapedDaemon(t)
	addEcho(t, td, "test", "")
	pat, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
		code plexus.ErrorCode
	}{
		{"NoCredential", nil, http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"AgentPAT", bearer(pat), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"AgentToken", bearer(tok.Token), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"AgentSession", session(sid), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"WrongScrapeToken", bearer(testScrapeToken + "x"), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"ScrapeTokenPrefix", bearer(testScrapeToken[:len(testScrapeToken)-1]), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"WrongKey", bearer(plexus.PrefixConnectionKey + strings.Repeat("0", 43)), http.StatusUnauthorized, plexus.CodeUnauthorized},
		{"ForeignHost", map[string]string{"Host": "evil.example:80", "Authorization": "Bearer " + testScrapeToken}, http.StatusForbidden, plexus.CodeHostForbidden},
		{"ForeignOrigin", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + td.key}, http.StatusForbidden, plexus.CodeHostForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, raw := td.raw(t, http.MethodGet, "/metrics", c.hdr, nil)
			wantEnvelope(t, st, raw, c.want, c.code)
			if bytes.Contains(raw, []byte("plexus_calls_total")) {
				t.Errorf("refused scrape leaked the exposition: %s", raw)
			}
		})
	}
	t.Run("ConnectionKey", func(t *testing.T) {
		if fams := scrape(t, td, td.admin()); fams["plexus_calls_total"] == nil && fams["plexus_tokens_minted_total"] == nil {
			t.Errorf("scrape with the connection-key holds no plexus metrics")
		}
	})
	t.Run("NoSecretInLabels", func(t *testing.T) {
		st, raw := td.raw(t, http.MethodGet, "/metrics", bearer(testScrapeToken), nil)
		for _, secret := range []string{pat, tok.Token, td.key, testScrapeToken, sid} {
			if st != http.StatusOK || bytes.Contains(raw, []byte(secret)) {
				t.Errorf("status %d; the exposition holds a secret %.12s…", st, secret)
			}
		}
	})
}
