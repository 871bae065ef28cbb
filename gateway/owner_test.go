package gateway

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// TestAdminCheckThrottle, on a real journal with the auth throttle and the
// gateway on one clock: a connection-key that keeps failing is throttled by
// the key presented, so the owner's own key still works; the block lifts
// when its backoff ends; the failures are journaled as one row, then one
// summary with their count when the denial window ends, and neither key is
// ever written down.
func TestAdminCheckThrottle(t *testing.T) {
	ctx := context.Background()
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	g := mustGateway(t, home, db, clk.Now, func(d *Deps) { d.Throttle = auth.NewThrottle(clk.Now) })
	wrongKey := plexus.PrefixConnectionKey + strings.Repeat("w", 43)
	wrong := Credentials{Bearer: wrongKey, Remote: "127.0.0.1:50000"}
	owner := Credentials{ConnectionKey: home.ConnectionKey, Remote: "127.0.0.1:50001"}
	check := func(c Credentials) *plexus.Error {
		if err := g.AdminCheck(ctx, c); err != nil {
			return plexus.AsError(err)
		}
		return nil
	}
	rows := func() []plexus.Activity {
		rs, err := db.Activity(ctx, journal.Filter{Type: "auth.failed"})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}

	for i := range auth.DefaultMaxFailures {
		if e := check(wrong); e == nil || e.Code != plexus.CodeUnauthorized {
			t.Fatalf("wrong key, attempt %d: %v, want unauthorized", i+1, e)
		}
	}
	e := check(wrong)
	if e == nil || e.Code != plexus.CodeRateLimited || !cmp.Equal(e.Detail, map[string]any{"retryAfterSeconds": int64(1)}) {
		t.Fatalf("wrong key after %d failures: %+v, want rate_limited, retry after 1s", auth.DefaultMaxFailures, e)
	}
	if e := check(owner); e != nil {
		t.Fatalf("the owner's key while another key is blocked: %v, want accepted", e)
	}
	if got := len(rows()); got != 1 {
		t.Fatalf("%d auth.failed rows within the denial window, want 1 (the rest coalesce)", got)
	}

	clk.Advance(auth.DefaultBaseBackoff)
	if e := check(wrong); e == nil || e.Code != plexus.CodeUnauthorized {
		t.Fatalf("wrong key once its backoff ended: %v, want checked again (unauthorized)", e)
	}

	// The next failure after the window closes it: its summary, then a row
	// of its own.
	clk.Advance(DefaultDenialWindow)
	if e := check(wrong); e == nil || e.Code != plexus.CodeUnauthorized {
		t.Fatalf("wrong key after the window: %v, want unauthorized", e)
	}
	got := rows()
	if len(got) != 3 {
		t.Fatalf("auth.failed rows = %+v, want the first, a summary and a new one", got)
	}
	want := map[string]any{"coalesced": true, "count": json.Number(strconv.Itoa(auth.DefaultMaxFailures)), "firstAuditId": got[0].AuditID(),
		"reason": "wrong connection-key"}
	sum := map[string]any{}
	for k := range want {
		sum[k] = got[1].Payload[k]
	}
	if diff := cmp.Diff(want, sum); diff != "" {
		t.Errorf("summary row payload (-want +got):\n%s\nwhole payload: %v", diff, got[1].Payload)
	}
	for _, r := range got {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Target != "admin" || strings.Contains(string(b), wrongKey) || strings.Contains(string(b), home.ConnectionKey) {
			t.Errorf("row %s: target %q, want admin and no key: %s", r.AuditID(), r.Target, b)
		}
	}
}
