package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// Files of a [CredStore] directory.
const (
	CredentialsFile = "credentials.json"
	TokensFile      = "tokens.json"
)

// Store errors callers branch on.
var (
	// ErrNotEnrolled: the store holds no credential yet.
	ErrNotEnrolled = errors.New("not enrolled")
	// ErrAlreadyEnrolled: the store holds a credential that an enrollment
	// would replace; replacing it must be forced.
	ErrAlreadyEnrolled = errors.New("already enrolled")
)

// Credentials is what enrollment leaves behind: the gateway, the agent id
// the PAT is bound to, and the PAT itself. Its String and LogValue redact the
// PAT, so printing or logging one by accident leaks nothing.
type Credentials struct {
	BaseURL string `json:"baseUrl"`
	AgentID string `json:"agentId"`
	PAT     string `json:"pat"`
}

func (c Credentials) String() string {
	return fmt.Sprintf("agent %s at %s (PAT redacted)", c.AgentID, c.BaseURL)
}

// GoString redacts the PAT from %#v as well.
func (c Credentials) GoString() string { return c.String() }

// LogValue redacts the PAT from slog output.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("baseUrl", c.BaseURL), slog.String("agentId", c.AgentID))
}

// HeldToken is a scoped token the agent holds, with what it needs to use and
// refresh it. Its String redacts the token.
type HeldToken struct {
	Token     string              `json:"token"`
	JTI       string              `json:"jti"`
	Scopes    []plexus.TokenScope `json:"scopes"`
	ExpiresAt time.Time           `json:"expiresAt"`
	// GrantExpiresAt is the end of the grant's trust window, past which
	// refresh stops working; zero when the gateway did not say.
	GrantExpiresAt time.Time `json:"grantExpiresAt,omitzero"`
	SessionID      string    `json:"sessionId"`
}

func (t HeldToken) String() string {
	return fmt.Sprintf("token %s (expires %s, redacted)", t.JTI, t.ExpiresAt.Format(time.RFC3339))
}

// GoString redacts the token from %#v as well.
func (t HeldToken) GoString() string { return t.String() }

// Covers reports whether t carries a top-level scope for id with every verb
// in verbs. Scopes synthesized for a workflow's members are not counted: they
// authorize the workflow's own dispatch, not a direct call.
func (t HeldToken) Covers(id string, verbs []plexus.Verb) bool {
	for _, s := range t.Scopes {
		if s.ID == id && s.SynthesizedFor == "" && plexus.CoversVerbs(s.Verbs, verbs) {
			return true
		}
	}
	return false
}

// refreshable reports whether the grant behind t may still re-mint it.
func (t HeldToken) refreshable(now time.Time) bool {
	return t.GrantExpiresAt.IsZero() || now.Before(t.GrantExpiresAt)
}

func heldFromScoped(st *plexus.ScopedToken, sessionID string) HeldToken {
	h := HeldToken{Token: st.Token, JTI: st.JTI, Scopes: st.Scopes, ExpiresAt: st.ExpiresAt, SessionID: sessionID}
	if st.GrantExpiresAt != nil {
		h.GrantExpiresAt = *st.GrantExpiresAt
	}
	return h
}

// cachedSession is the handshake session the agent reuses across processes.
type cachedSession struct {
	ID        string    `json:"sessionId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// sessionMargin is how long before its expiry a session stops being reused.
const sessionMargin = 30 * time.Second

func (s *cachedSession) live(now time.Time) bool {
	return s != nil && s.ID != "" && now.Add(sessionMargin).Before(s.ExpiresAt)
}

// pendingRequest is a grant request that pended and, as far as this agent
// knows, is still outstanding. It is remembered so that calling the same
// capability again resumes it (GET /grants/status) rather than asking the
// owner a second time. Only the session that asked can fetch the approved
// token, so a record is good only while that session lives.
type pendingRequest struct {
	CapabilityID string        `json:"capabilityId"`
	PendingID    string        `json:"pendingId"`
	SessionID    string        `json:"sessionId"`
	Verbs        []plexus.Verb `json:"verbs"`
	CreatedAt    time.Time     `json:"createdAt"`
}

// tokenCache is the content of tokens.json. The session id is a credential
// too (it authenticates /manifest, /grants and /events), so it lives here,
// 0600, beside the tokens and the outstanding pending requests (at most one
// per capability).
type tokenCache struct {
	Session *cachedSession   `json:"session,omitempty"`
	Tokens  []HeldToken      `json:"tokens"`
	Pending []pendingRequest `json:"pending,omitempty"`
	// Revoked names the capabilities whose token the gateway reported
	// revoked, until the agent asks for them again with a purpose.
	Revoked []string `json:"revoked,omitempty"`
}

// findPending returns the remembered pending request for capability id.
func (c *tokenCache) findPending(id string) (pendingRequest, bool) {
	for _, p := range c.Pending {
		if p.CapabilityID == id {
			return p, true
		}
	}
	return pendingRequest{}, false
}

// CredStore persists an agent's credential and token cache in one directory
// (0700): credentials.json and tokens.json, both 0600, each written
// atomically (temp file, fsync, rename, fsync of the directory) so a crash
// leaves either the old or the new file, never a torn one.
//
// A CredStore is safe for concurrent use within a process. Two processes
// sharing a directory never corrupt it, but a token one of them caches may
// be lost to the other's concurrent write (it is re-minted on the next call).
type CredStore struct {
	dir string
	mu  sync.Mutex // serializes read-modify-write of the files
}

// NewCredStore returns a store rooted at dir. Nothing is created until the
// first write.
func NewCredStore(dir string) *CredStore { return &CredStore{dir: dir} }

// Dir is the store's directory.
func (s *CredStore) Dir() string { return s.dir }

// Credentials returns the stored credential, or an error wrapping
// [ErrNotEnrolled]. A credentials file readable by anyone but its owner is
// refused, as ssh refuses a loose private key.
func (s *CredStore) Credentials() (Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readCredentials()
}

func (s *CredStore) readCredentials() (Credentials, error) {
	path := filepath.Join(s.dir, CredentialsFile)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, fmt.Errorf("%w: no %s in %s", ErrNotEnrolled, CredentialsFile, s.dir)
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("read credentials: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Credentials{}, fmt.Errorf("read credentials: %s has mode %04o; it must be 0600 (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("read credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(data, &c); err != nil {
		return Credentials{}, fmt.Errorf("read credentials: %s: %w", path, err)
	}
	if c.PAT == "" || c.AgentID == "" {
		return Credentials{}, fmt.Errorf("%w: %s holds no PAT", ErrNotEnrolled, path)
	}
	return c, nil
}

// SaveCredentials stores c. An existing, different credential is replaced
// only when force is true (else the error wraps [ErrAlreadyEnrolled]); the
// token cache of the replaced identity is discarded with it.
func (s *CredStore) SaveCredentials(c Credentials, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.readCredentials()
	switch {
	case err == nil && old == c:
		return nil
	case err == nil && !force:
		return fmt.Errorf("%w as %q at %s", ErrAlreadyEnrolled, old.AgentID, old.BaseURL)
	case err != nil && !errors.Is(err, ErrNotEnrolled) && !force:
		return err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	if err := platform.WriteFileAtomic(filepath.Join(s.dir, CredentialsFile), append(data, '\n'), platform.WriteOptions{Mode: 0o600}); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := os.Remove(filepath.Join(s.dir, TokensFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("discard old tokens: %w", err)
	}
	return nil
}

func (s *CredStore) loadCache() (tokenCache, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readCache()
}

func (s *CredStore) readCache() (tokenCache, error) {
	var c tokenCache
	data, err := os.ReadFile(filepath.Join(s.dir, TokensFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read token cache: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		// A cache is only a cache: a corrupt one is dropped, not fatal.
		return tokenCache{}, nil
	}
	return c, nil
}

// updateCache applies fn to the token cache and writes it back.
func (s *CredStore) updateCache(fn func(*tokenCache)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.readCache()
	if err != nil {
		return err
	}
	fn(&c)
	c.Tokens = slices.DeleteFunc(c.Tokens, func(t HeldToken) bool { return t.Token == "" })
	c.Pending = slices.DeleteFunc(c.Pending, func(p pendingRequest) bool { return p.CapabilityID == "" || p.PendingID == "" })
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save token cache: %w", err)
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	if err := platform.WriteFileAtomic(filepath.Join(s.dir, TokensFile), append(data, '\n'), platform.WriteOptions{Mode: 0o600}); err != nil {
		return fmt.Errorf("save token cache: %w", err)
	}
	return nil
}

// ensureDir creates the directory 0700, and tightens it to 0700 when it
// exists with wider permissions: it is the agent's own secret store.
func (s *CredStore) ensureDir() error {
	if s.dir == "" {
		return errors.New("credential store: no directory")
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", s.dir, err)
	}
	fi, err := os.Stat(s.dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", s.dir, err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(s.dir, 0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", s.dir, err)
		}
	}
	return nil
}
