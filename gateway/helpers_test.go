package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
)

// mustGateway is a gateway over db with home's keys, reading clock (nil:
// the real one, or the bubble's under testing/synctest), an empty registry
// and no sources; edit, when set, adjusts its dependencies first.
func mustGateway(tb testing.TB, home *scaffold.Home, db *journal.DB, clock func() time.Time, edit func(*Deps)) *Gateway {
	tb.Helper()
	signer, err := auth.NewSigner(home.SigningKey, "plexus", clock)
	if err != nil {
		tb.Fatal(err)
	}
	hasher, err := auth.NewHasher(home.HashKey)
	if err != nil {
		tb.Fatal(err)
	}
	d := Deps{Store: db, Events: db, Registry: registry.New(registry.Options{Clock: clock}),
		Signer: signer, Hasher: hasher, Authorizer: auth.UserConfirmAuthorizer{}, ConnectionKey: home.ConnectionKey,
		Sources: func(plexus.SourceConfig) (plexus.Source, error) { return nil, errors.New("no sources in this test") },
		Clock:   clock}
	if edit != nil {
		edit(&d)
	}
	g, err := New(Config{}, d)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// mustUpdate runs fn in a journal transaction, failing the test on error.
func mustUpdate(tb testing.TB, db *journal.DB, fn func(tx plexus.StateTx) error) {
	tb.Helper()
	if err := db.Update(context.Background(), true, fn); err != nil {
		tb.Fatalf("update: %v", err)
	}
}

// actions lists the action types of the journal's rows, in order.
func actions(tb testing.TB, db *journal.DB) []string {
	tb.Helper()
	rows, err := db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ActionType
	}
	return out
}
