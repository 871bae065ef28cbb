package journal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// record writes one row per action type, in order, on trace.
func record(t *testing.T, td *testDB, trace string, rows ...plexus.Activity) {
	t.Helper()
	for _, a := range rows {
		a.Actor, a.TraceID = plexus.ActorSystem, trace
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Record(&a) })
	}
}

func types(rows []plexus.Activity) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ActionType)
	}
	return out
}

func TestNewest(t *testing.T) {
	td := mustOpen(t)
	ctx := context.Background()
	if id, err := td.LastID(ctx); err != nil || id != 0 {
		t.Fatalf("LastID of an empty journal = %d, %v; want 0", id, err)
	}
	record(t, td, "trc_a", plexus.Activity{ActionType: "a.1"}, plexus.Activity{ActionType: "a.2"}, plexus.Activity{ActionType: "a.3"})
	for _, tt := range []struct {
		limit int
		want  []string
	}{
		{2, []string{"a.2", "a.3"}},
		{0, []string{"a.1", "a.2", "a.3"}},
		{9, []string{"a.1", "a.2", "a.3"}},
	} {
		rows, err := td.Newest(ctx, Filter{}, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, types(rows)); diff != "" {
			t.Errorf("Newest(limit %d) (-want +got):\n%s", tt.limit, diff)
		}
	}
	if id, err := td.LastID(ctx); err != nil || id != 3 {
		t.Errorf("LastID = %d, %v; want 3", id, err)
	}
}

// Follow hands over only the rows written after the cursor, each once, and
// ends without error with its context.
func TestFollow(t *testing.T) {
	td := mustOpen(t)
	record(t, td, "trc_a", plexus.Activity{ActionType: "old"})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- td.Follow(ctx, Filter{Type: "new."}, 1, time.Millisecond, func(rows []plexus.Activity) error {
			for _, r := range rows {
				got <- r.ActionType
			}
			return nil
		})
	}()
	record(t, td, "trc_a", plexus.Activity{ActionType: "new.1"}, plexus.Activity{ActionType: "other"}, plexus.Activity{ActionType: "new.2"})
	for _, want := range []string{"new.1", "new.2"} {
		if g := <-got; g != want {
			t.Errorf("followed %q, want %q", g, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow = %v after its context ended, want nil", err)
	}
	if len(got) != 0 {
		t.Errorf("a row was handed over twice: %q", <-got)
	}

	boom := errors.New("boom")
	err := td.Follow(context.Background(), Filter{}, 0, time.Millisecond, func([]plexus.Activity) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Follow = %v, want fn's error", err)
	}
}

// The token minted for an approval is the first token.minted after that
// decision's grant.approved on its trace: not one of an earlier decision.
func TestMintedOnApproval(t *testing.T) {
	td := mustOpen(t)
	ctx := context.Background()
	record(t, td, "trc_1",
		plexus.Activity{ActionType: "token.minted", Target: "jti_before"},
		plexus.Activity{ActionType: "grant.approved", Payload: map[string]any{"pendingId": "pend_1"}},
		plexus.Activity{ActionType: "grant.approved", Payload: map[string]any{"pendingId": "pend_1"}},
		plexus.Activity{ActionType: "token.minted", Target: "jti_1"},
		plexus.Activity{ActionType: "token.minted", Target: "jti_later"})
	record(t, td, "trc_2", plexus.Activity{ActionType: "grant.approved", Payload: map[string]any{"pendingId": "pend_2"}})
	for _, tt := range []struct{ trace, pending, want string }{
		{"trc_1", "pend_1", "jti_1"},
		{"trc_2", "pend_2", ""},
		{"trc_1", "pend_9", ""},
	} {
		got, err := td.MintedOnApproval(ctx, tt.trace, tt.pending)
		if err != nil || got != tt.want {
			t.Errorf("MintedOnApproval(%s, %s) = %q, %v; want %q", tt.trace, tt.pending, got, err, tt.want)
		}
	}
}
