package localrest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// ExcerptBytes bounds the excerpt of an error response quoted in a
// transport_error message.
const ExcerptBytes = 512

// errorBodyBytes is how much of a non-2xx body is read to make its excerpt.
const errorBodyBytes = 64 << 10

// redacted replaces every occurrence of a secret.
const redacted = "[redacted]"

// A redactor removes one secret from what a service sends back: the value
// itself and the forms a service echoing a request would write it in
// (query-escaped, path-escaped, inside a JSON string). The zero redactor
// removes nothing. A very short secret makes for aggressive redaction; that
// is the price of never echoing it.
type redactor struct {
	forms []string // longest first, so that no form is left half replaced
}

func newRedactor(secret string) redactor {
	if secret == "" {
		return redactor{}
	}
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if b, err := json.Marshal(secret); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(secret) == nil {
		b := bytes.TrimSpace(buf.Bytes())
		forms = append(forms, string(b[1:len(b)-1]))
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return redactor{forms: slices.Compact(forms)}
}

func (r redactor) string(s string) string {
	for _, f := range r.forms {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

func (r redactor) bytes(b []byte) []byte {
	for _, f := range r.forms {
		b = bytes.ReplaceAll(b, []byte(f), []byte(redacted))
	}
	return b
}

// value redacts every string and object key of a decoded JSON value.
func (r redactor) value(v any) any {
	if len(r.forms) == 0 {
		return v
	}
	switch v := v.(type) {
	case string:
		return r.string(v)
	case json.Number: // a numeric secret (a PIN) echoed as a number
		if s := r.string(string(v)); s != string(v) {
			return s
		}
		return v
	case []any:
		for i := range v {
			v[i] = r.value(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.string(k)] = r.value(x)
		}
		return out
	}
	return v
}

// normalize turns a 2xx response into the call's data:
//
//   - an empty body: {"status": code};
//   - JSON (a media type of application/json or *+json, or a body starting
//     with "{" or "[" that parses as one JSON value when the media type is
//     absent, text/plain or application/octet-stream): the decoded value,
//     numbers kept exactly as written;
//   - anything else: {"status", "contentType", "text"} with the body as
//     text when it is UTF-8, or base64 with "encoding": "base64" when not.
//
// The secret is redacted from all of it.
func normalize(status int, contentType string, body []byte, r redactor) any {
	if len(body) == 0 {
		return map[string]any{"status": status}
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if !isJSON && (mt == "" || mt == "text/plain" || mt == "application/octet-stream") {
		t := bytes.TrimLeft(body, " \t\r\n")
		isJSON = len(t) > 0 && (t[0] == '{' || t[0] == '[')
	}
	if isJSON {
		if v, ok := decodeJSON(body); ok {
			return r.value(v)
		}
	}
	body = r.bytes(body)
	out := map[string]any{"status": status, "contentType": contentType}
	if utf8.Valid(body) {
		out["text"] = string(body)
	} else {
		out["encoding"] = "base64"
		out["text"] = base64.StdEncoding.EncodeToString(body)
	}
	return out
}

// decodeJSON decodes exactly one JSON value.
func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

// excerpt is the start of an error body fit for a message: secret
// redacted, valid UTF-8, trimmed, at most ExcerptBytes bytes.
func excerpt(body []byte, r redactor) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(r.bytes(body)), "\uFFFD"))
	if len(s) <= ExcerptBytes {
		return s
	}
	const more = "…"
	cut := ExcerptBytes - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
