package console

import (
	"testing"
	"time"

	"github.com/plexus-gw/plexus/internal/plexustest"
)

func TestLink(t *testing.T) {
	clock := &plexustest.Clock{}
	clock.Set(time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC))
	a := newAuthStore(clock.Now, time.Minute, time.Hour)
	key := sum("plx_live_k")

	t.Run("OK", func(t *testing.T) {
		code, _ := a.mintLink(key)
		if got, ok := a.redeem(code); !ok || got != key {
			t.Fatalf("redeem = %v, %v; want the key's hash, true", got, ok)
		}
	})
	t.Run("ErrReused", func(t *testing.T) {
		code, _ := a.mintLink(key)
		a.redeem(code)
		if _, ok := a.redeem(code); ok {
			t.Error("a link worked twice")
		}
	})
	t.Run("ErrExpired", func(t *testing.T) {
		code, _ := a.mintLink(key)
		clock.Advance(time.Minute)
		if _, ok := a.redeem(code); ok {
			t.Error("an expired link worked")
		}
	})
	t.Run("Bounded", func(t *testing.T) {
		first, _ := a.mintLink(key)
		for range maxLinks {
			clock.Advance(time.Millisecond)
			a.mintLink(key)
		}
		if _, ok := a.redeem(first); ok {
			t.Error("the oldest link outlived the cap")
		}
		if len(a.links) > maxLinks {
			t.Errorf("%d links held, want at most %d", len(a.links), maxLinks)
		}
	})
}

func TestSession(t *testing.T) {
	clock := &plexustest.Clock{}
	clock.Set(time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC))
	a := newAuthStore(clock.Now, time.Minute, time.Hour)
	key := sum("plx_live_k")

	t.Run("OK", func(t *testing.T) {
		id, s := a.open(key)
		got, ok := a.lookup(id, key)
		if !ok || got != s || s.csrf == "" || s.csrf == id {
			t.Fatalf("lookup = %+v, %v", got, ok)
		}
	})
	t.Run("ErrOtherKey", func(t *testing.T) {
		id, _ := a.open(key)
		if _, ok := a.lookup(id, sum("plx_live_rotated")); ok {
			t.Error("a session outlived its key")
		}
		if _, ok := a.lookup(id, key); ok {
			t.Error("a session ended by a rotated key came back")
		}
	})
	t.Run("ErrExpired", func(t *testing.T) {
		id, _ := a.open(key)
		clock.Advance(time.Hour)
		if _, ok := a.lookup(id, key); ok {
			t.Error("an expired session worked")
		}
	})
	t.Run("ErrClosed", func(t *testing.T) {
		id, _ := a.open(key)
		a.close(id)
		if _, ok := a.lookup(id, key); ok {
			t.Error("a closed session worked")
		}
	})
}
