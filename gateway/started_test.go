package gateway

import (
	"bytes"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// TestIdempotencyScope: a keyed write or execute call is named by its
// agent, capability and key, never by its token (a retry after a refresh is
// the same call), and the journal sees only a keyed hash of that name.
func TestIdempotencyScope(t *testing.T) {
	h, err := auth.NewHasher(bytes.Repeat([]byte{7}, auth.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{d: Deps{Hasher: h}}
	call := func(agent, jti, id, key string, mutating bool) (string, string) {
		return g.idempotencyScope(plexus.InvokeRequest{ID: id, IdempotencyKey: key}, plexus.InvokeContext{AgentID: agent, JTI: jti}, mutating)
	}
	_, base := call("claude", "tok_1", "effects.line.append", "k-1", true)
	if base == "" || strings.Contains(base, "k-1") {
		t.Fatalf("hash %q: want a keyed hash that does not hold the key", base)
	}
	tests := []struct {
		name                  string
		agent, jti, id, key   string
		mutating, same, empty bool
	}{
		{name: "RefreshedToken", agent: "claude", jti: "tok_2", id: "effects.line.append", key: "k-1", mutating: true, same: true},
		{name: "OtherAgent", agent: "codex", jti: "tok_1", id: "effects.line.append", key: "k-1", mutating: true},
		{name: "OtherCapability", agent: "claude", jti: "tok_1", id: "effects.line.other", key: "k-1", mutating: true},
		{name: "OtherKey", agent: "claude", jti: "tok_1", id: "effects.line.append", key: "k-2", mutating: true},
		{name: "ReadOnly", agent: "claude", jti: "tok_1", id: "effects.line.append", key: "k-1", empty: true},
		{name: "NoKey", agent: "claude", jti: "tok_1", id: "effects.line.append", mutating: true, empty: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, hash := call(tc.agent, tc.jti, tc.id, tc.key, tc.mutating)
			switch {
			case tc.empty:
				if key != "" || hash != "" {
					t.Errorf("scope = %q, %q; want none", key, hash)
				}
			case (hash == base) != tc.same:
				t.Errorf("hash %q vs %q: same = %v, want %v", hash, base, hash == base, tc.same)
			}
		})
	}
}
