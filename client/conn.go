package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/sse"
)

// Default timeouts. An invoke may run a long capability, so it gets its own,
// longer bound; every other request is a quick state lookup.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultInvokeTimeout  = 10 * time.Minute
)

// maxBody caps how much of a response is read, so a confused peer cannot
// exhaust memory.
const maxBody = 64 << 20

// Option configures an [Agent] or an [Admin].
type Option func(*config)

type config struct {
	httpClient     *http.Client
	host           string
	info           plexus.ClientInfo
	now            func() time.Time
	requestTimeout time.Duration
	invokeTimeout  time.Duration
	via            string
	ownListener    bool
}

// WithVia makes an [Admin] say which channel its requests come through
// (plexus.ViaCLI for the command line); without it the gateway records the
// admin API.
func WithVia(channel string) Option { return func(c *config) { c.via = channel } }

// WithClientInfo sets the client metadata an [Agent] sends at handshake.
func WithClientInfo(info plexus.ClientInfo) Option { return func(c *config) { c.info = info } }

func newConfig(opts []Option) *config {
	c := &config{
		info:           plexus.ClientInfo{Name: "plexus-client", Version: plexus.Version},
		now:            time.Now,
		requestTimeout: DefaultRequestTimeout,
		invokeTimeout:  DefaultInvokeTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	if c.httpClient == nil {
		c.httpClient = defaultHTTPClient(c.dialer())
	}
	return c
}

// dialTimeout bounds connecting to the gateway.
const dialTimeout = 5 * time.Second

func defaultHTTPClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			// Never a proxy: it would see PATs and tokens. The gateway is local.
			Proxy:               nil,
			DialContext:         dial,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConns:        4,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// conn is the HTTP plumbing both clients share. It is immutable after
// construction and safe for concurrent use.
type conn struct {
	base          *url.URL
	host          string
	hc            *http.Client
	reqTimeout    time.Duration
	invokeTimeout time.Duration
	via           string
}

func newConn(baseURL string, cfg *config) (*conn, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("base URL %q: scheme must be http or https", baseURL)
	case u.Hostname() == "":
		return nil, fmt.Errorf("base URL %q: no host", baseURL)
	case u.Port() == "":
		// The Host guard compares the whole authority, port included.
		return nil, fmt.Errorf("base URL %q: no port", baseURL)
	case u.User != nil:
		return nil, errors.New("base URL: must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("base URL %q: must not carry a query or fragment", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	host := cfg.host
	if host == "" {
		host = u.Host
	}
	return &conn{base: u, host: host, hc: cfg.httpClient,
		reqTimeout: cfg.requestTimeout, invokeTimeout: cfg.invokeTimeout, via: cfg.via}, nil
}

// baseURL is the canonical base URL, without a trailing slash.
func (c *conn) baseURL() string { return c.base.String() }

// request is one HTTP exchange. path is escaped. bearer and session are credentials: they go
// in headers only and never into an error message.
type request struct {
	method  string
	path    string
	query   url.Values
	bearer  string
	session string
	body    any
	timeout time.Duration
	// onEvent, when set, asks for a Server-Sent Events answer (a streamed
	// /invoke): each event but the final "result" is handed to it, and the
	// result event's data is the body send returns. A plain JSON answer is
	// returned as it is.
	onEvent func(typ string, data []byte)
}

// send performs r and returns the status and body, whatever the status. Only
// transport failures are errors here.
func (c *conn) send(ctx context.Context, r request) (int, []byte, error) {
	timeout := r.timeout
	if timeout == 0 {
		timeout = c.reqTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return 0, nil, fmt.Errorf("%s %s: %w at %s: %w", r.method, r.path, ErrUnreachable, c.base.Host, err)
		}
		return 0, nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	data, err := readBody(resp, r.onEvent)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	return resp.StatusCode, data, nil
}

// newRequest is r as an HTTP request to the gateway: its body encoded, its
// already-escaped path under the base URL, and its headers.
func (c *conn) newRequest(ctx context.Context, r request) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(b)
	}
	// r.path is already escaped (ids in it went through url.PathEscape).
	unescaped, err := url.PathUnescape(r.path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	u := *c.base
	u.Path = c.base.Path + unescaped
	u.RawPath = c.base.EscapedPath() + r.path
	u.RawQuery = r.query.Encode()
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	req.Host = c.host
	req.Header.Set("Accept", "application/json")
	if r.onEvent != nil {
		req.Header.Set("Accept", "text/event-stream, application/json")
	}
	req.Header.Set("User-Agent", "plexus-client/"+plexus.Version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	if r.session != "" {
		req.Header.Set(plexus.SessionHeader, r.session)
	}
	if c.via != "" {
		req.Header.Set(plexus.ViaHeader, c.via)
	}
	return req, nil
}

// readBody reads resp's body: the result event's data of a Server-Sent
// Events answer when onEvent asks for one, else the body, up to maxBody.
func readBody(resp *http.Response, onEvent func(typ string, data []byte)) ([]byte, error) {
	if onEvent != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, err := readEvents(resp.Body, onEvent)
		if err != nil {
			return nil, fmt.Errorf("read stream: %w", err)
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("response larger than %d bytes", maxBody)
	}
	return data, nil
}

// readEvents reads a Server-Sent Events body, handing each event to
// onEvent, until the "result" event, whose data it returns. An event is
// at most maxBody bytes.
func readEvents(body io.Reader, onEvent func(typ string, data []byte)) ([]byte, error) {
	r := sse.NewReader(body, sse.Options{MaxEvent: maxBody})
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		typ := strings.TrimSpace(string(ev.Type))
		if typ == "result" {
			return ev.Data, nil
		}
		onEvent(typ, ev.Data)
	}
}

// call performs r, decodes a 2xx body into out (when out is non-nil) and
// turns any other status into an *Error.
func (c *conn) call(ctx context.Context, r request, out any) (int, error) {
	status, data, err := c.send(ctx, r)
	if err != nil {
		return 0, err
	}
	if status < 200 || status > 299 {
		return status, decodeError(status, data)
	}
	if err := decodeInto(data, out); err != nil {
		return status, fmt.Errorf("%s %s: decode response: %w", r.method, r.path, err)
	}
	return status, nil
}

func decodeInto(data []byte, out any) error {
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}
