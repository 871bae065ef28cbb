package scaffold

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Token lifetime bounds and trust-window defaults (protocol §4d).
const (
	DefaultTokenLifetimeMs  = 15 * 60 * 1000
	MinTokenLifetimeMs      = 60 * 1000
	MaxTokenLifetimeMs      = 60 * 60 * 1000
	DefaultMaxTrustWindowMs = 30 * 24 * 60 * 60 * 1000
	DefaultBind             = "127.0.0.1"
	DefaultPort             = 7077
)

// MaxActivityRetentionDays is the ceiling of ActivityRetentionDays: 100
// years. Far above it the days overflow a time.Duration and the daemon
// would prune rows the owner meant to keep.
const MaxActivityRetentionDays = 36500

// AuthConfig is auth-config.json. Load clamps TokenLifetimeMs into
// [60000, 3600000] (0 or absent means 900000) and defaults a zero
// MaxTrustWindowMs to 30 days; a negative MaxTrustWindowMs is a problem.
// StrictSameUser refuses agents whose connection belongs to the owner's own
// OS user (otherwise they are admitted, with a warning in the log and the
// journal). Notify is the command run (argv, never a shell) with the
// gateway's one-line notification appended as its last argument whenever a
// decision is put up for the owner, such as ["notify-send", "Plexus"].
// NotifyWebhook, when set, receives a JSON POST for each decision put up
// (inbox.Webhook: ntfy's publish format).
// MaxStreamsPerSession and MaxStreamsPerAgent cap the /events streams open
// at once (absent or 0: the gateway's defaults, 8 and 32); a negative cap is
// a problem. MovedScrapeToken is read only to refuse it: the scrape token
// is in its own file now ([ReadScrapeToken]).
// ActivityRetentionDays, when positive, has the daemon prune activity rows
// older than that many days (absent or 0: activity is kept forever; at most
// MaxActivityRetentionDays).
// RateLimit and FailedCredentials are the owner's limits
// ([AuthConfig.Limits]); the daemon applies their edits while it runs.
type AuthConfig struct {
	TokenLifetimeMs       int64            `json:"tokenLifetimeMs"`
	MaxTrustWindowMs      int64            `json:"maxTrustWindowMs"`
	StrictSameUser        bool             `json:"strictSameUser,omitempty"`
	Notify                []string         `json:"notify,omitempty"`
	NotifyWebhook         *NotifyWebhook   `json:"notifyWebhook,omitempty"`
	MaxStreamsPerSession  int              `json:"maxStreamsPerSession,omitempty"`
	MaxStreamsPerAgent    int              `json:"maxStreamsPerAgent,omitempty"`
	MovedScrapeToken      string           `json:"scrapeToken,omitempty"`
	ActivityRetentionDays int              `json:"activityRetentionDays,omitempty"`
	RateLimit             *RateLimitConfig `json:"rateLimit,omitempty"`
	FailedCredentials     *ThrottleConfig  `json:"failedCredentials,omitempty"`
}

// NotifyWebhook is the owner's notify webhook: an http or https URL with no
// user or password in it (such as "https://ntfy.sh"), and the ntfy topic
// to publish to ("" for a receiver that takes no topic).
type NotifyWebhook struct {
	URL   string `json:"url"`
	Topic string `json:"topic,omitempty"`
}

// MinScrapeTokenLen is the shortest scrape token the scrape-token file takes.
const MinScrapeTokenLen = 32

// DefaultAuthConfig is what Init writes.
func DefaultAuthConfig() AuthConfig {
	return AuthConfig{TokenLifetimeMs: DefaultTokenLifetimeMs, MaxTrustWindowMs: DefaultMaxTrustWindowMs}
}

// TokenLifetime is TokenLifetimeMs as a duration.
func (a AuthConfig) TokenLifetime() time.Duration {
	return time.Duration(a.TokenLifetimeMs) * time.Millisecond
}

// MaxTrustWindow is MaxTrustWindowMs as a duration.
func (a AuthConfig) MaxTrustWindow() time.Duration {
	return time.Duration(a.MaxTrustWindowMs) * time.Millisecond
}

// Network is network.json. Bind must be a loopback address (127.0.0.0/8,
// ::1 or "localhost") unless AllowNonLoopback is true: exposing the gateway
// beyond the machine is an explicit, written-down choice, never a typo.
// AllowedOrigins are the browser origins ("http://host:port") the Host/Origin
// guard admits besides none.
type Network struct {
	Bind             string   `json:"bind"`
	Port             int      `json:"port"`
	AllowedOrigins   []string `json:"allowedOrigins"`
	AllowNonLoopback bool     `json:"allowNonLoopback,omitempty"`
}

// DefaultNetwork is what Init writes.
func DefaultNetwork() Network {
	return Network{Bind: DefaultBind, Port: DefaultPort, AllowedOrigins: []string{}}
}

// Home is a loaded PLEXUS_HOME: its paths and the values the daemon needs.
// Keys are held in memory only; Home must never be logged or serialized.
type Home struct {
	Dir                                              string
	Inbox, Active, Rejected, Archive, Audit, Secrets string
	Journal                                          string // Dir/journal.db
	SocketDir                                        string // Dir/run, created on demand by the ipc transport
	MCPConfig                                        string // Dir/mcp.json, optional
	ConnectionKeyFile, SigningKeyFile, HashKeyFile   string
	ChainKeyFile, TokenKeyFile, Anchor               string
	AuthConfigFile, NetworkFile                      string
	ConnectionKey                                    string
	SigningKey, HashKey, ChainKey, TokenKey          []byte
	Auth                                             AuthConfig
	Network                                          Network
}

// Layout returns the paths of the layout under home, without reading
// anything (for commands that only need a path, like the journal's).
func Layout(home string) *Home {
	j := func(n string) string { return filepath.Join(home, n) }
	return &Home{
		Dir: home, Inbox: j(DirInbox), Active: j(DirActive), Rejected: j(DirRejected),
		Archive: j(DirArchive), Audit: j(DirAudit), Secrets: j(DirSecrets),
		Journal: j(FileJournal), SocketDir: j(DirRun), MCPConfig: j(FileMCPConfig),
		ConnectionKeyFile: j(FileConnectionKey), SigningKeyFile: j(FileSigningKey), HashKeyFile: j(FileHashKey),
		ChainKeyFile: j(FileChainKey), TokenKeyFile: j(FileTokenKey), Anchor: j(FileAnchor),
		AuthConfigFile: j(FileAuthConfig), NetworkFile: j(FileNetwork),
	}
}

// Problem is one thing wrong with the layout: what, and how to fix it.
type Problem struct {
	Path string
	What string
	Fix  string
}

func (p Problem) String() string { return p.What + "; " + p.Fix }

// LayoutError lists every problem Verify or Load found, not just the first.
type LayoutError struct {
	Home     string
	Problems []Problem
}

func (e *LayoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "PLEXUS_HOME %s has %d problem(s):", e.Home, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Verify checks the layout under home: every folder exists, is a folder and
// is not open to group or others; every key file exists, is not open to
// group or others, and holds a key of at least 32 bytes (the token-key
// exactly 32); both configs exist, are not writable by group or others,
// parse strictly and hold valid values. It returns a *LayoutError listing every problem with its fix.
func Verify(home string) error {
	_, err := Load(home)
	return err
}

// Load verifies the layout (see [Verify]) and returns its values, with the
// token lifetime clamped and defaults applied.
func Load(home string) (*Home, error) {
	h := Layout(home)
	v := &verifier{home: home}
	if !v.dir(home, home) {
		return nil, v.err()
	}
	for _, d := range Dirs {
		v.dir(filepath.Join(home, d), d+"/")
	}
	if b, ok := v.file(h.ConnectionKeyFile, FileConnectionKey, true); ok {
		if k, err := parseConnectionKey(string(b)); err != nil {
			v.badKey(h.ConnectionKeyFile, FileConnectionKey, err, "")
		} else {
			h.ConnectionKey = k
		}
	}
	if b, ok := v.file(h.SigningKeyFile, FileSigningKey, true); ok {
		if k, err := parseHexKey(b); err != nil {
			v.badKey(h.SigningKeyFile, FileSigningKey, err, " (every token issued so far stops verifying)")
		} else {
			h.SigningKey = k
		}
	}
	if b, ok := v.file(h.HashKeyFile, FileHashKey, true); ok {
		if k, err := parseHexKey(b); err != nil {
			v.badKey(h.HashKeyFile, FileHashKey, err, " (every enrolled agent must then enroll again)")
		} else {
			h.HashKey = k
		}
	}
	if b, ok := v.file(h.ChainKeyFile, FileChainKey, true); ok {
		if k, err := parseHexKey(b); err != nil {
			v.badKey(h.ChainKeyFile, FileChainKey, err, chainKeyConsequence)
		} else {
			h.ChainKey = k
		}
	}
	if b, ok := v.file(h.TokenKeyFile, FileTokenKey, true); ok {
		if k, err := parseTokenKey(b); err != nil {
			v.badKey(h.TokenKeyFile, FileTokenKey, err, tokenKeyConsequence)
		} else {
			h.TokenKey = k
		}
	}
	if b, ok := v.file(h.AuthConfigFile, FileAuthConfig, false); ok {
		h.Auth = v.authConfig(h.AuthConfigFile, b)
	}
	if b, ok := v.file(h.NetworkFile, FileNetwork, false); ok {
		h.Network = v.network(h.NetworkFile, b)
	}
	v.scrapeToken()
	if err := v.err(); err != nil {
		return nil, err
	}
	return h, nil
}

// chainKeyConsequence is what replacing the chain-key costs: the journal
// refuses a key its chain does not verify with.
const chainKeyConsequence = " (a journal keyed with the old one will not open: restore the old chain-key, or move journal.db and journal.anchor aside to start a new journal)"

// tokenKeyConsequence is what replacing the token-key costs: the OAuth
// sign-ins sealed with the old one no longer open.
const tokenKeyConsequence = " (every remote MCP server signed in with OAuth must then be signed in to again: plexus mcp login NAME)"

// TokenKeySize is the token-key's size: an AES-256 key.
const TokenKeySize = 32

// parseTokenKey reads the token-key: exactly [TokenKeySize] bytes in hex,
// as AES-256 takes it (a longer one is refused, not cut).
func parseTokenKey(b []byte) ([]byte, error) {
	k, err := parseHexKey(b)
	if err != nil {
		return nil, err
	}
	if len(k) != TokenKeySize {
		return nil, fmt.Errorf("key is %d bytes, want %d (AES-256)", len(k), TokenKeySize)
	}
	return k, nil
}

// ReadChainKey reads and checks home's chain-key for a command that only
// reads the journal (plexus journal verify): it never creates one. The
// error says what is wrong and how to fix it, never the key.
func ReadChainKey(home string) ([]byte, error) {
	h := Layout(home)
	v := &verifier{home: home}
	if _, err := os.Lstat(h.ChainKeyFile); errors.Is(err, fs.ErrNotExist) {
		v.add(h.ChainKeyFile, FileChainKey+" is missing",
			"restore it from a backup of this home: the keyed rows of journal.db cannot be checked without it (plexus init would make a new key they do not verify with)")
		return nil, v.err()
	}
	b, ok := v.file(h.ChainKeyFile, FileChainKey, true)
	if ok {
		k, err := parseHexKey(b)
		if err == nil && len(v.problems) == 0 {
			return k, nil
		}
		if err != nil {
			v.badKey(h.ChainKeyFile, FileChainKey, err, chainKeyConsequence)
		}
	}
	return nil, v.err()
}

// verifier collects problems.
type verifier struct {
	home     string
	problems []Problem
}

func (v *verifier) add(path, what, fix string) {
	v.problems = append(v.problems, Problem{Path: path, What: what, Fix: fix})
}

func (v *verifier) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &LayoutError{Home: v.home, Problems: v.problems}
}

func (v *verifier) initHint() string { return "run: plexus init --home " + shq(v.home) }

// dir checks one folder and reports whether it exists as a folder.
func (v *verifier) dir(path, name string) bool {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(path, name+" is missing", v.initHint())
		return false
	case err != nil:
		v.add(path, name+" cannot be read: "+errText(err), "check its permissions")
		return false
	case !fi.IsDir():
		v.add(path, name+" is not a directory", "move it aside, then "+v.initHint())
		return false
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		v.add(path, fmt.Sprintf("%s is mode %04o (group or others can enter it)", name, perm),
			"run: chmod 700 "+shq(path))
	}
	return true
}

// file checks one file's existence and mode and returns its contents. A
// secret must not be readable by group or others; a config must not be
// writable by them (someone else could rebind the gateway).
func (v *verifier) file(path, name string, secret bool) ([]byte, bool) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(path, name+" is missing", v.initHint())
		return nil, false
	case err != nil:
		v.add(path, name+" cannot be read: "+errText(err), "check its permissions")
		return nil, false
	case !fi.Mode().IsRegular():
		v.add(path, name+" is not a regular file", "move it aside, then "+v.initHint())
		return nil, false
	}
	perm := fi.Mode().Perm()
	switch {
	case secret && perm&0o077 != 0:
		v.add(path, fmt.Sprintf("%s is mode %04o (group or others can read it)", name, perm), "run: chmod 600 "+shq(path))
	case !secret && perm&0o022 != 0:
		v.add(path, fmt.Sprintf("%s is mode %04o (group or others can change it)", name, perm), "run: chmod 600 "+shq(path))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		v.add(path, name+" cannot be read: "+errText(err), "check its permissions")
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		v.add(path, name+" is empty", "remove it, then "+v.initHint()+" (a new one is generated)")
		return nil, false
	}
	return b, true
}

func (v *verifier) badKey(path, name string, err error, consequence string) {
	v.add(path, name+" does not hold a valid key: "+err.Error(),
		"remove it, then "+v.initHint()+" to generate a new one"+consequence)
}

func (v *verifier) authConfig(path string, b []byte) AuthConfig {
	var a AuthConfig
	if err := strictJSON(b, &a); err != nil {
		v.add(path, FileAuthConfig+" is not valid: "+err.Error(),
			"fix the JSON, or remove it and "+v.initHint()+" to restore the defaults")
		return a
	}
	switch {
	case a.TokenLifetimeMs == 0:
		a.TokenLifetimeMs = DefaultTokenLifetimeMs
	case a.TokenLifetimeMs < MinTokenLifetimeMs:
		a.TokenLifetimeMs = MinTokenLifetimeMs
	case a.TokenLifetimeMs > MaxTokenLifetimeMs:
		a.TokenLifetimeMs = MaxTokenLifetimeMs
	}
	switch {
	case a.MaxTrustWindowMs == 0:
		a.MaxTrustWindowMs = DefaultMaxTrustWindowMs
	case a.MaxTrustWindowMs < 0:
		v.add(path, fmt.Sprintf("%s: maxTrustWindowMs is %d", FileAuthConfig, a.MaxTrustWindowMs),
			fmt.Sprintf("set it to a positive number of milliseconds (default %d, 30 days)", int64(DefaultMaxTrustWindowMs)))
	}
	if a.MaxStreamsPerSession < 0 || a.MaxStreamsPerAgent < 0 {
		v.add(path, fmt.Sprintf("%s: maxStreamsPerSession is %d and maxStreamsPerAgent %d", FileAuthConfig, a.MaxStreamsPerSession, a.MaxStreamsPerAgent),
			"set each to a positive number of /events streams, or remove it for the default (8 per session, 32 per agent)")
	}
	v.observability(path, a)
	v.limits(path, a)
	if len(a.Notify) > 0 && (strings.TrimSpace(a.Notify[0]) == "" || slices.ContainsFunc(a.Notify, func(s string) bool { return strings.ContainsRune(s, 0) })) {
		v.add(path, FileAuthConfig+": notify must name a command first and hold no NUL characters",
			`write it as a list such as ["notify-send", "Plexus"], or remove it`)
	}
	if w := a.NotifyWebhook; w != nil {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			v.add(path, FileAuthConfig+": notifyWebhook.url must be an http or https URL with no user or password in it",
				`write it as {"url": "https://ntfy.sh", "topic": "my-plexus"}, or remove it`)
		}
	}
	return a
}

// observability refuses a scrape token in auth-config.json (it moved to
// its own file) and checks the activity retention.
func (v *verifier) observability(path string, a AuthConfig) {
	if a.MovedScrapeToken != "" {
		v.add(path, FileAuthConfig+": scrapeToken no longer goes here (this file may be committed to a repository)",
			fmt.Sprintf("move the token into %s (chmod 600; .gitignore leaves it out) and remove scrapeToken from %s",
				shq(filepath.Join(v.home, FileScrapeToken)), FileAuthConfig))
	}
	if a.ActivityRetentionDays < 0 || a.ActivityRetentionDays > MaxActivityRetentionDays {
		v.add(path, fmt.Sprintf("%s: activityRetentionDays is %d", FileAuthConfig, a.ActivityRetentionDays),
			fmt.Sprintf("set it to a positive number of days up to %d (100 years), or remove it to keep the activity journal forever", MaxActivityRetentionDays))
	}
}

func (v *verifier) network(path string, b []byte) Network {
	var n Network
	if err := strictJSON(b, &n); err != nil {
		v.add(path, FileNetwork+" is not valid: "+err.Error(),
			"fix the JSON, or remove it and "+v.initHint()+" to restore the defaults")
		return n
	}
	if n.Bind == "" {
		n.Bind = DefaultBind
	}
	if n.Port == 0 {
		n.Port = DefaultPort
	}
	if n.AllowedOrigins == nil {
		n.AllowedOrigins = []string{}
	}
	if n.Port < 1 || n.Port > 65535 {
		v.add(path, fmt.Sprintf("%s: port %d is out of range", FileNetwork, n.Port), "set \"port\" between 1 and 65535 (default 7077)")
	}
	host := strings.TrimSuffix(strings.TrimPrefix(n.Bind, "["), "]")
	ip := net.ParseIP(host)
	switch {
	case ip == nil && host != "localhost":
		v.add(path, fmt.Sprintf("%s: bind %q is not an IP address", FileNetwork, n.Bind), `set "bind" to "127.0.0.1"`)
	case host != "localhost" && !ip.IsLoopback() && !n.AllowNonLoopback:
		v.add(path, fmt.Sprintf("%s: bind %q is not a loopback address", FileNetwork, n.Bind),
			`set "bind" to "127.0.0.1", or add "allowNonLoopback": true to expose Plexus beyond this machine (the connection-key then guards /admin/api from the network)`)
	}
	for _, o := range n.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			v.add(path, fmt.Sprintf("%s: allowed origin %q is not an origin", FileNetwork, o),
				`write origins as "http://host:port" with no path`)
		}
	}
	return n
}

// strictJSON decodes one JSON object, refusing unknown fields so that a
// misspelt setting is reported rather than silently ignored.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// parseConnectionKey checks the connection-key format: the plx_live_ prefix
// and at least 32 bytes of base64url. Errors never contain the key.
func parseConnectionKey(s string) (string, error) {
	k := strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(k, plexus.PrefixConnectionKey)
	if !ok {
		return "", fmt.Errorf("want the %s prefix", plexus.PrefixConnectionKey)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(rest, "="))
	if err != nil {
		return "", errors.New("want base64url after the prefix")
	}
	if len(b) < keyBytes {
		return "", fmt.Errorf("key is %d bytes, want at least %d", len(b), keyBytes)
	}
	return k, nil
}

// parseHexKey decodes a hex key of at least 32 bytes.
func parseHexKey(b []byte) ([]byte, error) {
	k, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, errors.New("want hex digits")
	}
	if len(k) < keyBytes {
		return nil, fmt.Errorf("key is %d bytes, want at least %d", len(k), keyBytes)
	}
	return k, nil
}

// errText is an error's text without the path it repeats.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// shq quotes a path for a shell command line when it needs quoting.
func shq(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%=,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
