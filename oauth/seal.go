package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// TokenKeySize is the size of [Options.TokenKey]: an AES-256 key.
const TokenKeySize = 32

// sealPrefix starts every blob a [sealedStore] writes. v1 is AES-256-GCM
// with a fresh random 12-byte nonce and the secret's name as additional
// data, written as base64 (standard, padded) of nonce ‖ ciphertext ‖ tag.
// A later format takes another version, so an older Plexus says what it
// met instead of taking it for a legacy blob.
const (
	sealPrefix = "plexus-sealed:v1:"
	sealFamily = "plexus-sealed:"
)

// errUnopened is a sealed blob that does not open: sealed under another
// token-key (replaced, or lost and made anew), or changed since, or moved
// from another server's name. It says nothing of the blob.
var errUnopened = errors.New("the stored tokens could not be opened (token-key changed?)")

// errSealFormat is a blob sealed in a format this build does not know.
var errSealFormat = errors.New("the stored tokens are sealed in a format this Plexus does not know (written by a newer one?)")

// sealedStore stands between the [Manager] and the secrets store and seals
// everything the package stores there (tokens, refresh tokens, a
// registered client's secret): a copy of secrets/ without the token-key
// shows nothing of them. A blob written before sealing (plain JSON) is
// read as it is and sealed when it is next written. The owner's own
// secrets never pass through it: they stay plain files the owner may edit.
// Safe for concurrent use, as the Store under it is.
type sealedStore struct {
	st   Store
	aead cipher.AEAD
}

var _ Store = (*sealedStore)(nil)

func newSealedStore(st Store, key []byte) (*sealedStore, error) {
	if len(key) != TokenKeySize {
		return nil, fmt.Errorf("token key is %d bytes, want %d", len(key), TokenKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	return &sealedStore{st: st, aead: aead}, nil
}

// Secret returns the opened value of name: a sealed blob opened (or
// [errUnopened], [errSealFormat]), a legacy plain one as it is.
func (s *sealedStore) Secret(name string) (string, error) {
	v, err := s.st.Secret(name)
	if err != nil {
		return "", err
	}
	body, sealed := strings.CutPrefix(v, sealPrefix)
	switch {
	case !sealed && strings.HasPrefix(v, sealFamily):
		return "", errSealFormat
	case !sealed:
		return v, nil
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	n := s.aead.NonceSize()
	if err != nil || len(raw) < n+s.aead.Overhead() {
		return "", errUnopened
	}
	// The name as additional data: a blob copied under another server's
	// name does not open there, so its token never goes to that server.
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return "", errUnopened
	}
	return string(plain), nil
}

// SetSecret stores v sealed under name.
func (s *sealedStore) SetSecret(name string, v []byte) error {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(v)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("seal %s: %w", name, err)
	}
	sealed := s.aead.Seal(nonce, nonce, v, []byte(name))
	return s.st.SetSecret(name, []byte(sealPrefix+base64.StdEncoding.EncodeToString(sealed)))
}

// RemoveSecret deletes name, sealed or not.
func (s *sealedStore) RemoveSecret(name string) error { return s.st.RemoveSecret(name) }
