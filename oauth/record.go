package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/plexus-gw/plexus"
)

// record is what a sign-in leaves in the secrets store, one JSON blob under
// "oauth.<server>": the tokens, the client they were issued to (a
// dynamically registered client's secret included) and where to refresh
// and revoke them. It is a secret as a whole.
type record struct {
	// ServerURL is the MCP server the tokens were issued for. A record for
	// another URL (the entry's url changed, or two names share a secret
	// name) is never used: a token goes only to its own server.
	ServerURL string        `json:"server_url"`
	Token     *oauth2.Token `json:"token,omitempty"`
	// Scopes are the scopes the owner approved: those the sign-in asked for.
	// A step-up beyond them is a new sign-in request, never a silent grant.
	Scopes        []string         `json:"scopes,omitempty"`
	Resource      string           `json:"resource"`
	Issuer        string           `json:"issuer,omitempty"`
	TokenURL      string           `json:"token_url"`
	RevocationURL string           `json:"revocation_url,omitempty"`
	ClientID      string           `json:"client_id"`
	ClientSecret  string           `json:"client_secret,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"auth_style,omitempty"`
	// Registered marks a client Plexus registered itself (RFC 7591): the
	// next sign-in at the same issuer with the same redirect reuses it.
	Registered  bool   `json:"registered,omitempty"`
	RedirectURL string `json:"redirect_url,omitempty"`
}

// secretName is where a server's sign-in is stored. A secret name holds
// at most 64 characters; a server name too long for "oauth."+name keeps
// its first 40 and a hash of the whole, so two long names never share one.
func secretName(server string) string {
	n := "oauth." + strings.ToLower(server)
	if len(n) <= maxSecretName {
		return n
	}
	sum := sha256.Sum256([]byte(strings.ToLower(server)))
	return n[:len("oauth.")+40] + "-" + hex.EncodeToString(sum[:])[:16]
}

// SecretName is the name of the secret holding server's sign-in, for the
// daemon to tell whether one is stored.
func SecretName(server string) string { return secretName(server) }

// maxSecretName is the secrets store's limit on a name.
const maxSecretName = 64

// loadRecord reads a server's record; a server never signed in has none
// (nil, nil). A stored blob that cannot be used (sealed under another
// token-key, changed, not a sign-in) is an [*unreadableError].
func loadRecord(st Store, server string) (*record, error) {
	v, err := st.Secret(secretName(server))
	switch {
	case errors.Is(err, plexus.ErrNotFound):
		return nil, nil
	case errors.Is(err, errUnopened), errors.Is(err, errSealFormat):
		return nil, &unreadableError{server: server, why: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("read the stored sign-in of %s: %w", server, err)
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		// The decoder's message may quote the blob: say only where it is.
		return nil, &unreadableError{server: server, why: "the stored sign-in is not valid JSON"}
	}
	return &rec, nil
}

// unreadableError is a stored sign-in that cannot be used: the server
// needs sign-in again, which overwrites it. It never holds the blob.
type unreadableError struct{ server, why string }

func (e *unreadableError) Error() string {
	return fmt.Sprintf("%s (secret %s); run: plexus mcp login %s", e.why, secretName(e.server), e.server)
}

func saveRecord(st Store, server string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode the sign-in of %s: %w", server, err)
	}
	if err := st.SetSecret(secretName(server), b); err != nil {
		return fmt.Errorf("store the sign-in of %s: %w", server, err)
	}
	return nil
}

func removeRecord(st Store, server string) error {
	err := st.RemoveSecret(secretName(server))
	if err != nil && !errors.Is(err, plexus.ErrNotFound) {
		return fmt.Errorf("delete the sign-in of %s: %w", server, err)
	}
	return nil
}

// TokenError is a token or revocation endpoint's refusal, with the
// response body left out: a body is the server's text, and a careless one
// could echo what was sent.
type TokenError struct {
	Status int    // the HTTP status
	Code   string // the OAuth error code ("invalid_grant"), when the server sent one
}

func (e *TokenError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("the authorization server answered %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("the authorization server answered %d", e.Status)
}

// RegistrationError is a dynamic client registration's refusal (RFC
// 7591), with the response body left out: the SDK quotes it whole, and it
// may hold escape sequences or a client secret.
type RegistrationError struct {
	Status int    // the HTTP status, when known
	Code   string // the RFC 7591 error code, when the server sent one
}

func (e *RegistrationError) Error() string {
	msg := "client registration at the authorization server failed"
	if e.Status != 0 {
		msg += fmt.Sprintf(": it answered %d", e.Status)
	}
	if e.Code != "" {
		msg += " " + e.Code
	}
	return msg
}

// registrationStatus matches the SDK's message for a refused registration
// (oauthex/dcr.go), which has no type of its own.
var registrationStatus = regexp.MustCompile(`registration failed with status (\d{3})`)

// clean replaces what in err's chain may carry an authorization server's
// text: a token endpoint error by a [TokenError] and a registration error
// by a [RegistrationError], both holding no body. Other errors keep their
// message, with control characters replaced: it is shown on the owner's
// terminal and journaled. The chain (ErrNeedsSignIn) is kept where there
// is nothing to replace.
func clean(err error) error {
	if err == nil {
		return nil
	}
	var re *oauth2.RetrieveError
	var ce *oauthex.ClientRegistrationError
	switch {
	case errors.As(err, &ce):
		return &RegistrationError{Code: safeCode(ce.ErrorCode)}
	case registrationStatus.MatchString(err.Error()):
		st, _ := strconv.Atoi(registrationStatus.FindStringSubmatch(err.Error())[1])
		return &RegistrationError{Status: st}
	case !errors.As(err, &re):
		if msg := printable(err.Error()); msg != err.Error() {
			return errors.New(msg)
		}
		return err
	}
	te := &TokenError{Code: safeCode(re.ErrorCode)}
	if re.Response != nil {
		te.Status = re.Response.StatusCode
	}
	return te
}

// printable replaces control characters (terminal escape sequences
// among them) by '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

// safeCode keeps an OAuth error code only when it looks like one (RFC 6749
// §5.2: a short token of printable ASCII): it is the server's text, shown
// to the owner and journaled.
func safeCode(s string) string {
	if len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return ""
		}
	}
	return s
}
