package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/plexus-gw/plexus"
)

func TestNewSecrets(t *testing.T) {
	tests := []struct {
		name   string
		fn     func() (string, error)
		prefix string
		bytes  int
	}{
		{"ConnectionKey", NewConnectionKey, plexus.PrefixConnectionKey, 32},
		{"PAT", NewPAT, plexus.PrefixPAT, 32},
		{"EnrollCode", NewEnrollCode, plexus.PrefixEnrollCode, 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.fn()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := tt.fn()
			if a == b {
				t.Errorf("two calls returned the same secret %q", a)
			}
			body, ok := strings.CutPrefix(a, tt.prefix)
			if !ok {
				t.Fatalf("%q lacks prefix %q", a, tt.prefix)
			}
			raw, err := base64.RawURLEncoding.DecodeString(body)
			if err != nil {
				t.Fatalf("body %q is not unpadded base64url: %v", body, err)
			}
			if len(raw) != tt.bytes {
				t.Errorf("got %d random bytes, want %d", len(raw), tt.bytes)
			}
		})
	}
}

func TestHasher(t *testing.T) {
	if _, err := NewHasher(make([]byte, MinKeyLen-1)); err == nil {
		t.Fatal("NewHasher(31 bytes) succeeded, want error")
	}
	key := mustKey(t)
	h, err := NewHasher(key)
	if err != nil {
		t.Fatal(err)
	}
	key[0] ^= 0xff // the hasher must hold its own copy
	other, _ := NewHasher(mustKey(t))

	const pat = "plx_agent_secret"
	hash := h.Hash(pat)
	tests := []struct {
		name   string
		h      *Hasher
		secret string
		hash   []byte
		want   bool
	}{
		{"Same", h, pat, hash, true},
		{"OtherSecret", h, pat + "x", hash, false},
		{"OtherKey", other, pat, hash, false},
		{"TruncatedHash", h, pat, hash[:16], false},
		{"NilHash", h, pat, nil, false},
		{"Empty", h, "", h.Hash(""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Equal(tt.secret, tt.hash); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
		})
	}
	if string(h.Hash(pat)) != string(hash) {
		t.Error("Hash is not deterministic")
	}
	if len(hash) != 32 {
		t.Errorf("hash is %d bytes, want 32", len(hash))
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("tok_")
		body, ok := strings.CutPrefix(id, "tok_")
		if !ok {
			t.Fatalf("%q lacks prefix", id)
		}
		if _, err := ulid.ParseStrict(body); err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	if tr := NewTraceID(); len(tr) != ulid.EncodedSize {
		t.Errorf("trace id %q has length %d, want %d", tr, len(tr), ulid.EncodedSize)
	}
}

// TestHasherReuse: the recycled HMAC states give every input the HMAC a
// fresh one gives, in any order and from concurrent callers (a state put
// back must not carry its last input into the next).
func TestHasherReuse(t *testing.T) {
	key := mustKey(t)
	h, err := NewHasher(key)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{"", "a", `{"path":"/etc/hosts"}`, strings.Repeat("x", 1000), "a"}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(in))
		want[i] = m.Sum(nil)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for i, in := range inputs {
					if got := h.Hash(in); !bytes.Equal(got, want[i]) {
						t.Errorf("Hash(%.20q) = %x, want %x", in, got, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkHasherHash(b *testing.B) {
	h, err := NewHasher(bytes.Repeat([]byte{7}, MinKeyLen))
	if err != nil {
		b.Fatal(err)
	}
	in := `{"path":"notes/today.md"}`
	b.ReportAllocs()
	for b.Loop() {
		h.Hash(in)
	}
}
