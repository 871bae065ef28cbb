// Package localrest is the local-rest transport: it calls an HTTP API that
// an application on the owner's machine serves on loopback (Obsidian's Local
// REST API, a local web service), for entries of extensions whose route is
// {method, pathTemplate, secret, timeoutMs} (extension spec §2.2, §4).
//
// A call goes like this. The route is read from the entry and checked; the
// input becomes the request (see [Transport.Dispatch] for the rule); the
// service is located through the manifest's serviceHint by a [Locator]; the
// route's secret, if it names one, is read from [Secrets] at that moment
// and attached as a bearer token, a header or a query parameter; the
// response becomes the call's data or a transport_error, and a service that
// does not answer is source_unavailable.
//
// The package must never talk to anything but loopback: a located base URL
// whose host is not a loopback IP or "localhost" is refused, and the dialer
// itself refuses any resolved address that is not loopback. It never uses a
// proxy and never follows a redirect. It must never let a secret's value
// out: not into a result, an error message, an error's wrapped cause or a
// log line; what a service echoes back is redacted. It only speaks plain
// http: loopback traffic does not leave the machine, and the services it
// targets serve self-signed certificates that verification would refuse.
package localrest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Locator finds the base URL (scheme, host, port, optional path prefix) of
// the local service a manifest's serviceHint describes; the platform's
// locator answers http://127.0.0.1:<defaultPort>. It is called on every
// dispatch and health check, so it should be cheap, and it must be safe for
// concurrent use.
type Locator interface {
	Locate(ctx context.Context, hint plexus.LocalServiceHint) (baseURL string, err error)
}

// Secrets reads a named secret's value. It is called at dispatch, only for
// the secret the entry's route names, and the value is never kept beyond
// the call. A secret that is not set is an error wrapping [plexus.ErrNotFound] (or [fs.ErrNotExist])
// (or an empty value). Implementations must be safe for concurrent use.
type Secrets interface {
	Secret(name string) (string, error)
}

// DefaultMaxBody bounds the response body a call reads.
const DefaultMaxBody = 4 << 20

// Options are the transport's settings; the zero value is the default.
type Options struct {
	// Timeout bounds a call whose route sets no timeoutMs. Zero means
	// [DefaultTimeout]; it is capped, like timeoutMs, at [MaxTimeout].
	Timeout time.Duration
	// MaxBody caps a response body; a larger one fails the call. Zero
	// means [DefaultMaxBody].
	MaxBody int64
	// HealthTimeout bounds [Transport.Check]. Zero means 2 s.
	HealthTimeout time.Duration
}

// Transport is the local-rest transport. It is safe for concurrent use;
// its fields are set by [New] and never change. The HTTP client keeps idle
// connections to the services it called; [Transport.Close] releases them.
type Transport struct {
	locator       Locator
	secrets       Secrets
	dialer        *net.Dialer
	client        *http.Client
	timeout       time.Duration
	maxBody       int64
	healthTimeout time.Duration
}

var _ plexus.Transport = (*Transport)(nil)

// New returns a local-rest transport that locates services with loc and
// reads secrets from sec. Both are required.
func New(loc Locator, sec Secrets, opts Options) *Transport {
	if loc == nil || sec == nil {
		panic("localrest.New: a Locator and a Secrets are required")
	}
	t := &Transport{
		locator:       loc,
		secrets:       sec,
		dialer:        newDialer(),
		timeout:       min(cmpOr(opts.Timeout, DefaultTimeout), MaxTimeout),
		maxBody:       cmpOr(opts.MaxBody, DefaultMaxBody),
		healthTimeout: cmpOr(opts.HealthTimeout, 2*time.Second),
	}
	t.client = &http.Client{
		Transport: &http.Transport{
			Proxy:               nil, // never: the call must stay on this machine
			DialContext:         t.dialer.DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return t
}

// cmpOr returns a unless it is zero or negative, and b then.
func cmpOr[T int64 | time.Duration](a, b T) T {
	if a > 0 {
		return a
	}
	return b
}

// Kind returns [plexus.TransportLocalREST].
func (*Transport) Kind() plexus.TransportKind { return plexus.TransportLocalREST }

// Close releases idle connections to services. Calls may still be made
// after it; they open new connections.
func (t *Transport) Close() { t.client.CloseIdleConnections() }

// Dispatch calls the entry's service. The input becomes the request this
// way: each {field} of the route's pathTemplate is replaced by the input
// field's value, escaped as one path segment (a "/" in a value becomes
// %2F; "." and ".." are refused; dotted names reach into objects); the
// fields a placeholder names are consumed, and what is left of the input
// is sent as query parameters for GET, HEAD and DELETE (sorted by name;
// strings as they are, numbers and booleans formatted, null omitted,
// arrays and objects as JSON) or as a JSON object body for POST, PUT and
// PATCH.
//
// A 2xx response is the call's data: decoded JSON, or for any other body
// {"status", "contentType", "text"} (base64 with "encoding": "base64" when
// it is not UTF-8), or {"status"} when empty. Every failure is a result
// with OK false: a service that cannot be reached or located is
// source_unavailable; everything else — a bad route or input, a missing
// secret, a timeout, cancellation, a body over the limit, a 3xx (redirects
// are not followed) or any other non-2xx status — is transport_error.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	data, perr := t.dispatch(ctx, entry, input)
	return plexus.DispatchResult(entry.ID, data, perr)
}

func (t *Transport) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any) (any, *plexus.Error) {
	rt, perr := parseRoute(entry.Route, t.timeout)
	if perr != nil {
		return nil, perr
	}
	req, perr := rt.build(input)
	if perr != nil {
		return nil, perr
	}
	if err := ctx.Err(); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "call cancelled")
	}
	c := &call{rt: rt, what: rt.method + " " + rt.template.String()}
	if rt.secret != nil {
		if c.secret, perr = t.secret(rt.secret, req); perr != nil {
			return nil, perr
		}
	}
	c.red = newRedactor(c.secret)
	if c.base, perr = t.locate(ctx, rt.hint); perr != nil {
		return nil, perr
	}

	callCtx, cancel := context.WithTimeout(ctx, rt.timeout)
	defer cancel()
	hreq, perr := c.request(callCtx, req)
	if perr != nil {
		return nil, perr
	}
	resp, err := t.client.Do(hreq)
	if err != nil {
		return nil, c.failure(ctx, callCtx, err)
	}
	defer resp.Body.Close()
	return t.read(ctx, callCtx, c, resp)
}

// call is one dispatch once its route, secret and service are known.
type call struct {
	rt     *route
	base   *url.URL
	secret string // "" when the route names none
	red    redactor
	// what names the call in messages: the method and the template as the
	// author wrote it, never the expanded path (it holds input values) or
	// the URL (it may hold the secret).
	what string
}

// request makes the HTTP request: the base URL's scheme, host and path
// prefix, then the expanded path and query, with the secret attached.
func (c *call) request(ctx context.Context, req *request) (*http.Request, *plexus.Error) {
	target := c.base.Scheme + "://" + c.base.Host + strings.TrimSuffix(c.base.EscapedPath(), "/") + req.pathQuery
	ref := c.rt.secret
	if ref != nil && ref.Attach == plexus.AttachQuery {
		sep := "?"
		if strings.Contains(req.pathQuery, "?") {
			sep = "&"
		}
		target += sep + url.QueryEscape(ref.As) + "=" + url.QueryEscape(c.secret)
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hreq, err := http.NewRequestWithContext(ctx, c.rt.method, target, body)
	if err != nil || hreq.URL.Host != c.base.Host {
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s: the route does not make a valid URL", c.what)
	}
	hreq.Header.Set("User-Agent", "plexus-local-rest")
	hreq.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.8")
	if req.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if ref != nil {
		switch ref.Attach {
		case plexus.AttachBearer:
			hreq.Header.Set("Authorization", "Bearer "+c.secret)
		case plexus.AttachHeader:
			hreq.Header.Set(ref.As, c.secret)
		}
	}
	return hreq, nil
}

// read turns the response into the call's data or error.
func (t *Transport) read(ctx, callCtx context.Context, c *call, resp *http.Response) (any, *plexus.Error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, min(t.maxBody, errorBodyBytes)))
		status := strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode)))
		msg := fmt.Sprintf("%s: the %s service answered %s", c.what, appName(c.rt.hint), status)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			msg += " (redirects are not followed)"
		}
		if ex := excerpt(b, c.red); ex != "" {
			msg += ": " + ex
		}
		return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: msg, Detail: map[string]any{"status": resp.StatusCode}}
	}
	tooLarge := plexus.Errorf(plexus.CodeTransportError, "%s: the response exceeds the %s limit", c.what, size(t.maxBody))
	// A HEAD response announces the length of a body it does not carry.
	if c.rt.method != "HEAD" && resp.ContentLength > t.maxBody {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBody+1))
	if err != nil {
		return nil, c.failure(ctx, callCtx, err)
	}
	if int64(len(b)) > t.maxBody {
		return nil, tooLarge
	}
	return normalize(resp.StatusCode, resp.Header.Get("Content-Type"), b, c.red), nil
}

// secret reads the route's secret and checks that it can be attached.
// Messages name the secret, never its value.
func (t *Transport) secret(ref *plexus.ExtensionSecretRef, req *request) (string, *plexus.Error) {
	if ref.Attach == plexus.AttachQuery && slices.Contains(req.queryKeys, ref.As) {
		return "", plexus.Errorf(plexus.CodeTransportError, "input field %q collides with the query parameter that carries secret %q", ref.As, ref.Name)
	}
	v, err := t.secrets.Secret(ref.Name)
	switch {
	case errors.Is(err, plexus.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || err == nil && v == "":
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q is not set; run `plexus secrets set %s`", ref.Name, ref.Name)
	case err != nil:
		return "", plexus.WrapError(plexus.CodeTransportError, scrub(err, newRedactor(v)), fmt.Sprintf("secret %q could not be read", ref.Name))
	}
	if ref.Attach != plexus.AttachQuery && strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q holds a control character (a trailing newline?) that a header cannot carry", ref.Name)
	}
	return v, nil
}

// failure classifies an error from sending the request or reading the
// response; ctx is the caller's, callCtx carries the call's timeout. The
// URL (which may carry the secret) is stripped, and the rest of the cause
// is redacted before it is kept for logs.
func (c *call) failure(ctx, callCtx context.Context, err error) *plexus.Error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	cause := scrub(err, c.red)
	app := appName(c.rt.hint)
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case ctx.Err() != nil:
		return plexus.WrapError(plexus.CodeTransportError, cause, "call cancelled")
	case errors.Is(err, errNotLoopback):
		return plexus.WrapError(plexus.CodeTransportError, cause,
			fmt.Sprintf("refused to call the %s service: its address is not a loopback address", app))
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &dns):
		return plexus.WrapError(plexus.CodeSourceUnavailable, cause, unreachable(c.rt.hint, c.base))
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return plexus.WrapError(plexus.CodeTransportError, cause, fmt.Sprintf("%s timed out after %s", c.what, c.rt.timeout))
	}
	return plexus.WrapError(plexus.CodeTransportError, cause, fmt.Sprintf("%s: the call to the %s service failed", c.what, app))
}

// scrub returns err, or an error with its text redacted if the text holds
// the secret. The redacted copy does not wrap the original, so the secret
// cannot be reached through errors.Unwrap either.
func scrub(err error, red redactor) error {
	if err == nil {
		return nil
	}
	if s := red.string(err.Error()); s != err.Error() {
		return errors.New(s)
	}
	return err
}

// size formats a byte count for a message.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// String is the template as written.
func (tp template) String() string {
	var b strings.Builder
	write := func(ps []part) {
		for _, p := range ps {
			if p.field != "" {
				b.WriteString("{" + p.field + "}")
			} else {
				b.WriteString(p.lit)
			}
		}
	}
	write(tp.path)
	if len(tp.query) > 0 {
		b.WriteByte('?')
		write(tp.query)
	}
	return b.String()
}
