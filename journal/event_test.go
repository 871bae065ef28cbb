package journal

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestEvents(t *testing.T) {
	td := mustOpen(t)
	events := []plexus.Event{
		{Type: plexus.EventManifestChanged, Data: json.RawMessage(`{"type":"manifest_changed","revision":7}`)}, // 1: broadcast
		{Type: plexus.EventGrantResolved, AgentID: "a", SessionID: "s1",
			Data:   json.RawMessage(`{"type":"grant_resolved","pendingId":"p1","decision":"allow"}`),
			Secret: json.RawMessage(`{"token":"` + jwt + `"}`)}, // 2: one session of a
		{Type: plexus.EventTokenRevoked, AgentID: "a", Data: json.RawMessage(`{"type":"token_revoked","jti":"j1"}`)}, // 3: every session of a
		{Type: plexus.EventTokenRevoked, AgentID: "b", Data: json.RawMessage(`{"type":"token_revoked","jti":"j2"}`)}, // 4: agent b
		{Type: plexus.EventGrantResolved, SessionID: "admin1", Data: json.RawMessage(`{"type":"grant_resolved"}`)},   // 5: one admin session
		{Type: plexus.EventSourceStatus}, // 6: broadcast, no body
	}
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		for i := range events {
			if err := tx.Publish(&events[i]); err != nil {
				return err
			}
		}
		return nil
	})
	for i, e := range events {
		if e.ID != int64(i+1) || !e.At.Equal(t0) {
			t.Errorf("event %d: ID = %d, At = %v; want %d, %v", i, e.ID, e.At, i+1, t0)
		}
	}

	for _, tc := range []struct {
		name           string
		after          int64
		agent, session string
		limit          int
		want           []int64
	}{
		{"AgentSession1", 0, "a", "s1", 0, []int64{1, 2, 3, 6}},
		{"AgentSession2", 0, "a", "s2", 0, []int64{1, 3, 6}},
		{"OtherAgent", 0, "b", "s9", 0, []int64{1, 4, 6}},
		{"Admin", 0, "", "admin1", 0, []int64{1, 5, 6}},
		{"OtherAdmin", 0, "", "admin2", 0, []int64{1, 6}},
		{"After", 2, "a", "s1", 0, []int64{3, 6}},
		{"Limit", 0, "a", "s1", 2, []int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := td.EventsSince(context.Background(), tc.after, tc.agent, tc.session, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, e := range got {
				ids = append(ids, e.ID)
				if e.Secret != nil {
					t.Errorf("event %d replayed with a Secret", e.ID)
				}
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("RoundTrip", func(t *testing.T) {
		got, err := td.EventsSince(context.Background(), 1, "a", "s1", 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("EventsSince = %v, %v", got, err)
		}
		want := events[1]
		want.Secret = nil
		if diff := cmp.Diff(want, got[0]); diff != "" {
			t.Errorf("event 2 (-want +got):\n%s", diff)
		}
	})

	t.Run("SecretNeverStored", func(t *testing.T) {
		raw := rawDB(t, td.path)
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM events WHERE data LIKE '%eyJ%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d events rows hold a token", n)
		}
	})

	t.Run("DataRedacted", func(t *testing.T) {
		e := plexus.Event{Type: "x", Data: json.RawMessage(`{"type":"x","token":"t","n":12345678901234567890}`)}
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Publish(&e) })
		got, err := td.EventsSince(context.Background(), e.ID-1, "", "", 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("EventsSince = %v, %v", got, err)
		}
		if want := `{"n":12345678901234567890,"token":"[redacted]","type":"x"}`; string(got[0].Data) != want {
			t.Errorf("stored data = %s, want %s", got[0].Data, want)
		}
	})

	t.Run("ErrBadData", func(t *testing.T) {
		err := td.Update(context.Background(), false, func(tx plexus.StateTx) error {
			return tx.Publish(&plexus.Event{Type: "x", Data: json.RawMessage(`{not json`)})
		})
		if err == nil {
			t.Error("Publish accepted malformed data")
		}
	})
}
