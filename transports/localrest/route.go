package localrest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Limits of a call's duration.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
)

// routeDecl is the declaration's route object as the author wrote it
// (extension spec §2.2). Keys this transport does not know, such as
// attachSkills, belong to someone else and are ignored.
type routeDecl struct {
	Method       string                     `json:"method"`
	PathTemplate string                     `json:"pathTemplate"`
	Path         string                     `json:"path"` // legacy alias of pathTemplate
	Secret       *plexus.ExtensionSecretRef `json:"secret"`
	TimeoutMs    *int64                     `json:"timeoutMs"`
	Scheme       string                     `json:"scheme"`
}

// route is a parsed, checked local-rest route.
type route struct {
	method   string
	template template
	secret   *plexus.ExtensionSecretRef // attach and as filled in; nil if none
	timeout  time.Duration
	hint     plexus.LocalServiceHint
}

// methods are the HTTP methods a route may name. CONNECT, OPTIONS and TRACE
// are not ways to call a capability.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// sendsBody reports whether the input left over after the path template is
// sent as a JSON body (true) or as query parameters (false).
func sendsBody(method string) bool {
	return method == "POST" || method == "PUT" || method == "PATCH"
}

// parseRoute reads an entry's route ([plexus.ExtensionRoute]) and checks
// every key this transport uses, so that a bad route fails before the
// service, the secret store or the network is touched. defTimeout is the
// timeout of a route without timeoutMs.
func parseRoute(raw json.RawMessage, defTimeout time.Duration) (*route, *plexus.Error) {
	if len(raw) == 0 {
		return nil, plexus.Errorf(plexus.CodeTransportError, "local-rest entry has no route")
	}
	var er plexus.ExtensionRoute
	if err := json.Unmarshal(raw, &er); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "local-rest entry has an invalid route")
	}
	if len(er.Decl) == 0 || string(er.Decl) == "null" {
		return nil, plexus.Errorf(plexus.CodeTransportError, "local-rest entry has no route object; declare route {method, pathTemplate}")
	}
	var d routeDecl
	if err := json.Unmarshal(er.Decl, &d); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "local-rest route is not a valid route object (method, pathTemplate, secret {name, attach, as}, timeoutMs)")
	}
	if er.ServiceHint == nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "local-rest entry has no service to call: the extension manifest needs a serviceHint {app, defaultPort}")
	}
	rt := &route{method: "GET", hint: *er.ServiceHint, timeout: defTimeout}

	if d.Method != "" {
		rt.method = strings.ToUpper(d.Method)
		if !slices.Contains(methods, rt.method) {
			return nil, plexus.Errorf(plexus.CodeTransportError, "route.method %q is not one of %s", d.Method, strings.Join(methods, ", "))
		}
	}

	src, field := d.PathTemplate, "route.pathTemplate"
	if src == "" {
		src, field = d.Path, "route.path"
	}
	if src == "" {
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.pathTemplate is missing")
	}
	tpl, err := parseTemplate(src)
	if err != nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s %q: %v", field, src, err)
	}
	rt.template = tpl

	switch d.Scheme {
	case "", "http":
	case "https":
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.scheme https is not supported yet: point the route at the service's plain-HTTP loopback port")
	default:
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.scheme %q is not http", d.Scheme)
	}

	if d.TimeoutMs != nil {
		var perr *plexus.Error
		if rt.timeout, perr = plexus.RouteTimeout(*d.TimeoutMs, MaxTimeout); perr != nil {
			return nil, perr
		}
	}

	if d.Secret != nil {
		s, perr := checkSecret(*d.Secret, er.Secrets)
		if perr != nil {
			return nil, perr
		}
		rt.secret = s
	}
	return rt, nil
}

// checkSecret completes route.secret from the manifest's declaration of the
// same name (attach and as default to the declared ones, then to bearer) and
// checks that it can be attached to an HTTP request. A route may only name a
// secret its manifest declares (extension spec §8 rule 9); the registry
// checks that too, and this is the second lock on the same door.
func checkSecret(s plexus.ExtensionSecretRef, declared []plexus.ExtensionSecretRef) (*plexus.ExtensionSecretRef, *plexus.Error) {
	s, perr := plexus.ExtensionRoute{Secrets: declared}.SecretRef(s)
	if perr != nil {
		return nil, perr
	}
	if s.Attach == "" {
		s.Attach = plexus.AttachBearer
	}
	switch s.Attach {
	case plexus.AttachBearer:
	case plexus.AttachHeader:
		if !isToken(s.As) {
			return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.as must name the header that carries secret %q", s.Name)
		}
	case plexus.AttachQuery:
		if s.As == "" {
			return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.as must name the query parameter that carries secret %q", s.Name)
		}
	default:
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.attach %q cannot be used over local-rest (bearer, header or query)", s.Attach)
	}
	return &s, nil
}

// isToken reports whether s is a valid HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// A template is a parsed pathTemplate: a path, optionally followed by "?"
// and a query, in which {field} placeholders name input fields. Literal
// text is sent as written, so it must already be a valid URL path (and
// query): printable ASCII without spaces or "#".
type template struct {
	path, query []part
}

// part is literal text, or a placeholder when field is set.
type part struct {
	lit   string
	field string   // the placeholder as written, e.g. "note.id"
	keys  []string // field split on "."
}

func parseTemplate(s string) (template, error) {
	if !strings.HasPrefix(s, "/") {
		return template{}, fmt.Errorf(`must start with "/"`)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return template{}, fmt.Errorf("has a character that is not allowed in a URL (%q); percent-encode it", c)
		}
	}
	p, q, _ := strings.Cut(s, "?")
	var t template
	var err error
	if t.path, err = parseParts(p); err != nil {
		return template{}, err
	}
	if t.query, err = parseParts(q); err != nil {
		return template{}, err
	}
	return t, nil
}

func parseParts(s string) ([]part, error) {
	var parts []part
	for s != "" {
		open := strings.IndexAny(s, "{}")
		if open < 0 {
			parts = append(parts, part{lit: s})
			break
		}
		if s[open] == '}' {
			return nil, fmt.Errorf(`has a "}" without its "{"`)
		}
		if open > 0 {
			parts = append(parts, part{lit: s[:open]})
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf(`has a "{" without its "}"`)
		}
		name := s[open+1 : open+end]
		keys := strings.Split(name, ".")
		for _, k := range keys {
			if !validKey(k) {
				return nil, fmt.Errorf("has a placeholder {%s}: want input field names (letters, digits, _ and -) joined by dots", name)
			}
		}
		parts = append(parts, part{field: name, keys: keys})
		s = s[open+end+1:]
	}
	return parts, nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// request is what a call sends, computed from the route and the input
// before anything is located, resolved or dialled.
type request struct {
	pathQuery string // escaped path, then "?" and the query if there is one
	body      []byte // nil unless the method sends one
	// queryKeys are the query parameter names taken from the input, so that
	// a secret attached as a query parameter cannot be shadowed by one.
	queryKeys []string
}

// build turns the input into the request's path, query and body:
//
//   - each {field} in the path is replaced by the field's value escaped as
//     one path segment (url.PathEscape: "/" becomes %2F, so "a/b" stays one
//     segment and "../x" cannot climb); a value that is exactly "." or ".."
//     is refused. In the query part of the template, {field} is
//     query-escaped instead. Dotted names reach into objects ({note.id}).
//   - a top-level field named by a placeholder ({field}, not {field.sub})
//     is consumed. The rest of the input goes, for GET, HEAD and DELETE, into
//     query parameters in sorted key order (strings as they are, numbers and
//     booleans formatted, null skipped, arrays and objects JSON-encoded);
//     for POST, PUT and PATCH, into a JSON object body (possibly "{}").
//
// The input map is never modified.
func (rt *route) build(input map[string]any) (*request, *plexus.Error) {
	consumed := map[string]bool{}
	var path, query strings.Builder
	for _, pt := range rt.template.path {
		if pt.field == "" {
			path.WriteString(pt.lit)
			continue
		}
		s, perr := placeholderValue(input, pt)
		if perr != nil {
			return nil, perr
		}
		if s == "." || s == ".." {
			return nil, plexus.Errorf(plexus.CodeTransportError, "input field %q cannot be %q in a URL path", pt.field, s)
		}
		path.WriteString(url.PathEscape(s))
		if len(pt.keys) == 1 {
			consumed[pt.field] = true
		}
	}
	for _, pt := range rt.template.query {
		if pt.field == "" {
			query.WriteString(pt.lit)
			continue
		}
		s, perr := placeholderValue(input, pt)
		if perr != nil {
			return nil, perr
		}
		query.WriteString(url.QueryEscape(s))
		if len(pt.keys) == 1 {
			consumed[pt.field] = true
		}
	}

	rest := make([]string, 0, len(input))
	for k := range input {
		if !consumed[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)

	req := &request{}
	if sendsBody(rt.method) {
		obj := make(map[string]any, len(rest))
		for _, k := range rest {
			obj[k] = input[k]
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, plexus.WrapError(plexus.CodeTransportError, err, "the input cannot be sent as a JSON body")
		}
		req.body = b
	} else {
		for _, k := range rest {
			v := input[k]
			if v == nil {
				continue
			}
			s, ok := scalar(v)
			if !ok {
				b, err := json.Marshal(v)
				if err != nil {
					return nil, plexus.WrapError(plexus.CodeTransportError, err, fmt.Sprintf("input field %q cannot be sent as a query parameter", k))
				}
				s = string(b)
			}
			if query.Len() > 0 {
				query.WriteByte('&')
			}
			query.WriteString(url.QueryEscape(k))
			query.WriteByte('=')
			query.WriteString(url.QueryEscape(s))
			req.queryKeys = append(req.queryKeys, k)
		}
	}
	req.pathQuery = path.String()
	if query.Len() > 0 {
		req.pathQuery += "?" + query.String()
	}
	return req, nil
}

// placeholderValue looks up a placeholder's field in the input and formats
// it. Only strings, numbers and booleans can stand in a URL.
func placeholderValue(input map[string]any, pt part) (string, *plexus.Error) {
	var v any = input
	for _, k := range pt.keys {
		m, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = m[k]
	}
	if v == nil {
		return "", plexus.Errorf(plexus.CodeTransportError, "input field %q is required by the route's path", pt.field)
	}
	s, ok := scalar(v)
	if !ok {
		return "", plexus.Errorf(plexus.CodeTransportError, "input field %q must be a string, number or boolean to stand in the route's path", pt.field)
	}
	return s, nil
}

// scalar formats a string, number or boolean as URL text; numbers are
// written as JSON writes them (42, 1.5, 1e+21).
func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return v.String(), true
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		b, err := json.Marshal(v)
		if err != nil { // NaN or an infinity
			return "", false
		}
		return string(b), true
	}
	return "", false
}
