package cliexec

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/plexus-gw/plexus"
)

// redacted replaces a secret or credential in what the transport returns.
const redacted = "[redacted]"

// excerptBytes is the most stderr an error message carries.
const excerptBytes = 1024

// decodeOutput turns a successful call's stdout into its result data: one
// JSON object or array as its decoded value (numbers as json.Number, so
// that large integers stay exact), anything else as text.
func decodeOutput(out []byte) any {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			if _, err := dec.Token(); err == io.EOF {
				return v
			}
		}
	}
	return map[string]any{"stdout": strings.ToValidUTF8(string(out), "\uFFFD"), "exitCode": 0}
}

// scrub replaces every occurrence of secret in the strings, keys and
// numbers of v. A tool that prints its own credential must not hand it to
// the agent.
func scrub(v any, secret string) any {
	if secret == "" {
		return v
	}
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, secret, redacted)
	case json.Number:
		if strings.Contains(string(v), secret) {
			return strings.ReplaceAll(string(v), secret, redacted)
		}
		return v
	case []any:
		for i := range v {
			v[i] = scrub(v[i], secret)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[strings.ReplaceAll(k, secret, redacted)] = scrub(e, secret)
		}
		return out
	}
	return v
}

// credentialPrefixes mark the gateway's own credentials (see
// [plexus.PrefixPAT]); a tool has no business printing one, but if it does,
// the error message must not carry it.
var credentialPrefixes = []string{plexus.PrefixConnectionKey, plexus.PrefixPAT, plexus.PrefixEnrollCode}

// excerpt is the end of stderr for an error message: the secret and
// anything shaped like a Plexus credential redacted (over the whole kept
// tail, before it is cut, so that nothing is cut in half and missed), then
// at most excerptBytes of valid UTF-8, white space trimmed.
func excerpt(tail []byte, truncated bool, secret string) string {
	s := string(tail)
	if secret != "" {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	s = redactCredentials(s)
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.TrimSpace(s)
	if len(s) > excerptBytes {
		cut := len(s) - excerptBytes
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s, truncated = s[cut:], true
	}
	if truncated && s != "" {
		s = "…" + s
	}
	return s
}

// redactCredentials replaces each credential prefix and the base64url run
// after it.
func redactCredentials(s string) string {
	for _, p := range credentialPrefixes {
		if !strings.Contains(s, p) {
			continue
		}
		var sb strings.Builder
		for {
			i := strings.Index(s, p)
			if i < 0 {
				break
			}
			sb.WriteString(s[:i])
			sb.WriteString(redacted)
			s = s[i+len(p):]
			s = s[b64urlRun(s):]
		}
		sb.WriteString(s)
		s = sb.String()
	}
	return s
}

func b64urlRun(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return i
		}
	}
	return len(s)
}
