package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/plexus-gw/plexus"
)

// MinKeyLen is the shortest key, in bytes, that [NewHasher] and [NewSigner]
// accept: 256 bits, the size of the HMAC-SHA256 output.
const MinKeyLen = 32

// Random sizes of the credentials, in bytes before encoding.
const (
	connectionKeyBytes = 32
	patBytes           = 32
	enrollCodeBytes    = 24
)

// NewConnectionKey returns a fresh owner connection-key: "plx_live_" and 32
// random bytes in unpadded base64url.
func NewConnectionKey() (string, error) {
	return newSecret(plexus.PrefixConnectionKey, connectionKeyBytes)
}

// NewPAT returns a fresh per-agent personal access token: "plx_agent_" and 32
// random bytes in unpadded base64url.
func NewPAT() (string, error) { return newSecret(plexus.PrefixPAT, patBytes) }

// NewEnrollCode returns a fresh one-time enrollment code: "plx_enroll_" and
// 24 random bytes in unpadded base64url. Single use and short life (the
// gateway enforces both) make 192 bits ample.
func NewEnrollCode() (string, error) { return newSecret(plexus.PrefixEnrollCode, enrollCodeBytes) }

func newSecret(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random secret: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hasher turns credentials into keyed hashes (HMAC-SHA256) so that PATs,
// enrollment codes and the connection-key are stored and looked up by hash
// only. Keying the hash means a stolen journal.db alone cannot be used to
// test guesses offline; the hash key lives in its own 0600 file.
//
// A Hasher is immutable and safe for concurrent use.
type Hasher struct {
	key []byte
	// macs recycles keyed HMAC states (hash.Hash): a call hashes its input
	// (and its idempotency key), and building an HMAC re-derives the pads
	// and allocates both digests each time.
	macs sync.Pool
}

// NewHasher returns a Hasher keyed with a copy of key, which must be at
// least [MinKeyLen] bytes.
func NewHasher(key []byte) (*Hasher, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("hash key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	h := &Hasher{key: append([]byte(nil), key...)}
	h.macs.New = func() any { return hmac.New(sha256.New, h.key) }
	return h, nil
}

// Hash returns the HMAC-SHA256 of secret under the hasher's key. It is
// deterministic, so the result can be used as a lookup key.
func (h *Hasher) Hash(secret string) []byte {
	m, _ := h.macs.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(secret)) // a hash.Hash never returns an error
	sum := m.Sum(make([]byte, 0, sha256.Size))
	h.macs.Put(m)
	return sum
}

// AppendHash appends the HMAC-SHA256 of b under the hasher's key to dst:
// [Hasher.Hash] for bytes already at hand (an encoded call input), with no
// copy of them and no allocation when dst has room.
func (h *Hasher) AppendHash(dst, b []byte) []byte {
	m, _ := h.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(b) // a hash.Hash never returns an error
	dst = m.Sum(dst)
	h.macs.Put(m)
	return dst
}

// Equal reports whether secret hashes to hash, in constant time with respect
// to the hash contents.
func (h *Hasher) Equal(secret string, hash []byte) bool {
	return hmac.Equal(h.Hash(secret), hash)
}

// NewID returns prefix followed by a fresh ULID, e.g. "sess_01J…", "tok_…",
// "pend_…", "grant_…". ULIDs sort by creation time (millisecond precision);
// the 80 random bits come from crypto/rand, so ids are not guessable. Ids
// minted within the same millisecond are unique but not ordered.
func NewID(prefix string) string {
	return prefix + newULID().String()
}

// NewTraceID returns a fresh trace id: a bare 26-character ULID. Trace ids
// are ULIDs rather than UUIDs so that `plexus journal --trace` output and the
// ids themselves sort by time.
func NewTraceID() string { return newULID().String() }

func newULID() ulid.ULID {
	// crypto/rand.Reader never fails on supported platforms (Go 1.24+ panics
	// rather than returning an error), so MustNew cannot panic here.
	return ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader)
}
