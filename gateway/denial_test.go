package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// gatedStore is the real journal with a gate on Update and Append: once
// armed, the next write says it entered and waits to be let through. It shows which
// callers wait for another's journal write.
type gatedStore struct {
	*journal.DB
	armed   chan struct{} // receives once per armed Update
	entered chan struct{}
	release chan struct{}
}

func (s *gatedStore) Update(ctx context.Context, durable bool, fn func(plexus.StateTx) error) error {
	s.gate()
	return s.DB.Update(ctx, durable, fn)
}

// Append is gated like Update: the gateway records a lone row with it.
func (s *gatedStore) Append(ctx context.Context, a *plexus.Activity) error {
	s.gate()
	return s.DB.Append(ctx, a)
}

func (s *gatedStore) gate() {
	select {
	case <-s.armed:
		s.entered <- struct{}{}
		<-s.release
	default:
	}
}

// TestDenialNoLockAcrossWrite: while one agent's first rate_limited row
// is being written, another agent's denial that its open window absorbs is
// answered at once, instead of waiting behind the write for the lock of
// every window; and the waiting window's own absorbed denial gets the
// opening row's audit id once it is written.
func TestDenialNoLockAcrossWrite(t *testing.T) {
	ctx := context.Background()
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	st := &gatedStore{DB: db, armed: make(chan struct{}, 1), entered: make(chan struct{}), release: make(chan struct{})}
	g := mustGateway(t, home, db, clk.Now, func(d *Deps) { d.Store = st })
	deny := func(agent string) *plexus.Activity {
		return &plexus.Activity{Actor: agent, AgentID: agent, ActionType: "invoke.denied", Target: "x.read",
			Payload: map[string]any{"errorCode": string(plexus.CodeRateLimited)}}
	}
	key := func(agent string) denialKey {
		return denialKey{action: "invoke.denied", subject: agent, code: string(plexus.CodeRateLimited)}
	}
	bFirst, err := g.journalDenial(ctx, key("b"), deny("b"))
	if err != nil {
		t.Fatal(err)
	}

	st.armed <- struct{}{}
	type answer struct {
		id  string
		err error
	}
	aFirst, aSecond := make(chan answer, 1), make(chan answer, 1)
	go func() {
		id, err := g.journalDenial(ctx, key("a"), deny("a"))
		aFirst <- answer{id, err}
	}()
	<-st.entered // a's opening row is being written, and waits

	bDone := make(chan answer, 1)
	go func() {
		id, err := g.journalDenial(ctx, key("b"), deny("b"))
		bDone <- answer{id, err}
	}()
	select {
	case got := <-bDone:
		if got.err != nil || got.id != bFirst {
			t.Errorf("b's absorbed denial = %q, %v; want its window's row %q", got.id, got.err, bFirst)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's denial waited for a's journal write")
	}
	go func() {
		id, err := g.journalDenial(ctx, key("a"), deny("a"))
		aSecond <- answer{id, err}
	}()
	close(st.release)
	first, second := <-aFirst, <-aSecond
	if first.err != nil || second.err != nil || first.id == "" || second.id != first.id {
		t.Errorf("a's denials = %+v then %+v; want the second absorbed into the first's row", first, second)
	}
	if got := actions(t, db); len(got) != 2 {
		t.Errorf("journal rows %v, want one opening row per agent", got)
	}
}
