package localrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/localrest"
)

// TestMain fails the run if a test left an HTTP connection, server or call
// goroutine behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := leakedGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func leakedGoroutines(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "[running]") {
				continue // this one
			}
			if strings.Contains(g, "net/http.") || strings.Contains(g, "localrest") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const (
	secretName = "svc-key"
	// secretValue escapes differently in a query, a path and JSON, so that
	// each echoed form is exercised.
	secretValue = `s3cr3t/+ &=<v@l>"`
)

// locator answers a fixed base URL, or an error.
type locator struct {
	base string
	err  error
}

func (l locator) Locate(context.Context, plexus.LocalServiceHint) (string, error) {
	return l.base, l.err
}

// secretStore is an in-memory secret store; a missing name is fs.ErrNotExist.
type secretStore map[string]string

func (s secretStore) Secret(name string) (string, error) {
	v, ok := s[name]
	if !ok {
		return "", fmt.Errorf("secret %s: %w", name, fs.ErrNotExist)
	}
	return v, nil
}

// fixture is a real loopback HTTP server and a transport pointed at it.
type fixture struct {
	t   *testing.T
	srv *httptest.Server
	tr  *localrest.Transport
}

func newFixture(t *testing.T, h http.HandlerFunc) *fixture {
	return newFixtureOpts(t, h, localrest.Options{})
}

func newFixtureOpts(t *testing.T, h http.HandlerFunc, opts localrest.Options) *fixture {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{t: t, srv: srv, tr: newTransport(t, locator{base: srv.URL}, secretStore{secretName: secretValue}, opts)}
}

func newTransport(t *testing.T, loc localrest.Locator, sec localrest.Secrets, opts localrest.Options) *localrest.Transport {
	t.Helper()
	tr := localrest.New(loc, sec, opts)
	t.Cleanup(tr.Close)
	return tr
}

// entry is a local-rest entry with the given route object, the service hint
// {app: "svc"} and the manifest secret svc-key.
func entry(t *testing.T, decl string) plexus.Entry {
	t.Helper()
	raw, err := json.Marshal(plexus.ExtensionRoute{
		Decl:        json.RawMessage(decl),
		ServiceHint: &plexus.LocalServiceHint{App: "svc", DefaultPort: 27123},
		Secrets:     []plexus.ExtensionSecretRef{{Name: secretName, Attach: plexus.AttachBearer}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return plexus.Entry{ID: "svc.thing.read", Source: "svc", Kind: plexus.KindCapability, Transport: plexus.TransportLocalREST, Route: raw}
}

func (fx *fixture) call(decl string, input map[string]any) plexus.TransportResult {
	fx.t.Helper()
	return fx.tr.Dispatch(context.Background(), entry(fx.t, decl), input, plexus.DispatchContext{})
}

func wantOK(t *testing.T, res plexus.TransportResult) {
	t.Helper()
	if !res.OK || res.Error != nil {
		t.Fatalf("got error %v, want OK", res.Error)
	}
}

func wantCode(t *testing.T, res plexus.TransportResult, code plexus.ErrorCode, substr string) {
	t.Helper()
	if res.OK || res.Error == nil {
		t.Fatalf("got OK with %v, want %s", res.Data, code)
	}
	if res.Error.Code != code || !strings.Contains(res.Error.Message, substr) {
		t.Fatalf("got %s %q, want %s containing %q", res.Error.Code, res.Error.Message, code, substr)
	}
	if res.Error.CapabilityID != "svc.thing.read" {
		t.Errorf("got capability id %q, want svc.thing.read", res.Error.CapabilityID)
	}
}

// noSecret fails if the secret, in any form a service could echo it in,
// appears anywhere in the result: data, message, detail or wrapped cause.
func noSecret(t *testing.T, res plexus.TransportResult) {
	t.Helper()
	text := fmt.Sprintf("%#v", res.Data)
	if b, err := json.Marshal(res.Data); err == nil {
		text += string(b)
	}
	if res.Error != nil {
		text += res.Error.Error() + fmt.Sprintf("%#v", res.Error.Detail)
	}
	for _, form := range []string{secretValue, url.QueryEscape(secretValue), url.PathEscape(secretValue), "s3cr3t"} {
		if strings.Contains(text, form) {
			t.Fatalf("the secret (as %q) leaked into the result: %s", form, text)
		}
	}
}

// seen records requests a server received.
type seen struct {
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	Method, Path, Query, Auth, APIKey, ContentType, Body string
}

func (s *seen) record(r *http.Request) seenReq {
	b, _ := io.ReadAll(r.Body)
	sr := seenReq{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Auth: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-Api-Key"),
		ContentType: r.Header.Get("Content-Type"), Body: string(b),
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, sr)
	s.mu.Unlock()
	return sr
}

func (s *seen) last(t *testing.T) seenReq {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func TestKind(t *testing.T) {
	tr := newTransport(t, locator{}, secretStore{}, localrest.Options{})
	if got := tr.Kind(); got != plexus.TransportLocalREST {
		t.Fatalf("got %q, want %q", got, plexus.TransportLocalREST)
	}
}

func TestResponses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		status      int
		body        []byte
		want        any
	}{
		{"JSON", "application/json", 200,
			[]byte(`{"hits":[{"path":"a.md","score":1.5}],"n":12345678901234567890}`),
			map[string]any{"hits": []any{map[string]any{"path": "a.md", "score": json.Number("1.5")}}, "n": json.Number("12345678901234567890")}},
		{"JSONSuffix", "application/problem+json; charset=utf-8", 200, []byte(`[1,"x"]`), []any{json.Number("1"), "x"}},
		{"JSONSniffedFromTextPlain", "text/plain", 201, []byte(` {"a":true}`), map[string]any{"a": true}},
		{"JSONSniffedWithoutContentType", "", 200, []byte(`["x"]`), []any{"x"}},
		{"Text", "text/markdown; charset=utf-8", 200, []byte("# Note\nbody"),
			map[string]any{"status": 200, "contentType": "text/markdown; charset=utf-8", "text": "# Note\nbody"}},
		{"NumberAsTextIsText", "text/plain", 200, []byte("42"),
			map[string]any{"status": 200, "contentType": "text/plain", "text": "42"}},
		{"BadJSONIsText", "application/json", 200, []byte(`{"a":`),
			map[string]any{"status": 200, "contentType": "application/json", "text": `{"a":`}},
		{"TwoJSONValuesIsText", "application/json", 200, []byte(`{} {}`),
			map[string]any{"status": 200, "contentType": "application/json", "text": `{} {}`}},
		{"Binary", "application/octet-stream", 200, []byte{0xff, 0x00, 0xfe},
			map[string]any{"status": 200, "contentType": "application/octet-stream", "encoding": "base64", "text": "/wD+"}},
		{"NoContent", "", 204, nil, map[string]any{"status": 204}},
		{"EmptyOK", "text/plain", 200, nil, map[string]any{"status": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				} else {
					w.Header()["Content-Type"] = nil // no sniffing by the server
				}
				w.WriteHeader(tc.status)
				w.Write(tc.body)
			})
			res := fx.call(`{"method":"GET","pathTemplate":"/x"}`, nil)
			wantOK(t, res)
			if diff := cmp.Diff(tc.want, res.Data); diff != "" {
				t.Fatalf("data (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNon2xx(t *testing.T) {
	long := strings.Repeat("é", 2000) // 4000 bytes of two-byte runes
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.Error(w, "no such note", http.StatusNotFound)
		case "/long":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "x"+long)
		case "/invalid":
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte{'a', 0xff, 'b'})
		case "/odd":
			w.WriteHeader(599)
		}
	})
	res := fx.call(`{"pathTemplate":"/missing"}`, nil)
	wantCode(t, res, plexus.CodeTransportError, "GET /missing: the svc service answered 404 Not Found: no such note")
	if diff := cmp.Diff(map[string]any{"status": 404}, res.Error.Detail); diff != "" {
		t.Fatalf("detail (-want +got):\n%s", diff)
	}

	res = fx.call(`{"pathTemplate":"/long"}`, nil)
	wantCode(t, res, plexus.CodeTransportError, "500 Internal Server Error: xéé")
	_, ex, _ := strings.Cut(res.Error.Message, "Error: ")
	if len(ex) > localrest.ExcerptBytes || !utf8.ValidString(ex) || !strings.HasSuffix(ex, "…") {
		t.Fatalf("excerpt is %d bytes (valid UTF-8: %v), want at most %d, valid, marked as cut", len(ex), utf8.ValidString(ex), localrest.ExcerptBytes)
	}

	res = fx.call(`{"pathTemplate":"/invalid"}`, nil)
	wantCode(t, res, plexus.CodeTransportError, "502 Bad Gateway: a\uFFFDb")

	res = fx.call(`{"pathTemplate":"/odd"}`, nil)
	wantCode(t, res, plexus.CodeTransportError, "answered 599")
}

func TestRedirectNotFollowed(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		io.WriteString(w, "followed")
	})
	wantCode(t, fx.call(`{"pathTemplate":"/from"}`, nil), plexus.CodeTransportError, "answered 302 Found (redirects are not followed)")
	if n := s.count(); n != 1 {
		t.Fatalf("the server saw %d requests, want 1 (no redirect followed)", n)
	}
}

// blockingServer answers nothing until the request is cancelled or the
// test ends; started receives each request as it arrives.
func blockingServer(t *testing.T) (srv *httptest.Server, started chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	started = make(chan struct{}, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: no handler outlives the test
	return srv, started
}

func TestTimeout(t *testing.T) {
	srv, _ := blockingServer(t)
	tr := newTransport(t, locator{base: srv.URL}, secretStore{}, localrest.Options{})
	t.Run("Route", func(t *testing.T) {
		start := time.Now()
		res := tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/slow/{id}","timeoutMs":150}`), map[string]any{"id": "secret-id"}, plexus.DispatchContext{})
		wantCode(t, res, plexus.CodeTransportError, "GET /slow/{id} timed out after 150ms")
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("the call took %v", el)
		}
		if strings.Contains(res.Error.Error(), "secret-id") {
			t.Fatalf("the error names an input value: %v", res.Error)
		}
	})
	t.Run("Default", func(t *testing.T) {
		tr := newTransport(t, locator{base: srv.URL}, secretStore{}, localrest.Options{Timeout: 100 * time.Millisecond})
		wantCode(t, tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/slow"}`), nil, plexus.DispatchContext{}),
			plexus.CodeTransportError, "timed out after 100ms")
	})
	t.Run("SlowBody", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"partial":`)
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		tr := newTransport(t, locator{base: srv.URL}, secretStore{}, localrest.Options{})
		wantCode(t, tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/slow","timeoutMs":150}`), nil, plexus.DispatchContext{}),
			plexus.CodeTransportError, "timed out after 150ms")
	})
}

func TestCancel(t *testing.T) {
	srv, started := blockingServer(t)
	tr := newTransport(t, locator{base: srv.URL}, secretStore{}, localrest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	res := tr.Dispatch(ctx, entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{})
	wantCode(t, res, plexus.CodeTransportError, "call cancelled")

	// Already cancelled: nothing is sent.
	res = tr.Dispatch(ctx, entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{})
	wantCode(t, res, plexus.CodeTransportError, "call cancelled")
	select {
	case <-started:
		t.Fatal("a cancelled call reached the server")
	default:
	}
}

func TestServiceDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	tr := newTransport(t, locator{base: base}, secretStore{secretName: secretValue}, localrest.Options{})
	hint := plexus.LocalServiceHint{App: "svc", DefaultPort: 27123}

	// The query-attached secret is in the URL that failed; it must not
	// reach the error, wrapped cause included.
	res := tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"query","as":"key"}}`), nil, plexus.DispatchContext{})
	wantCode(t, res, plexus.CodeSourceUnavailable, "the svc service is not reachable at "+base+"; is it running?")
	noSecret(t, res)

	if h := tr.Check(context.Background(), hint); h.Status != plexus.HealthUnavailable || !strings.Contains(h.Detail, "not reachable at "+base) {
		t.Fatalf("got health %+v, want unavailable naming %s", h, base)
	}

	t.Run("NotLocated", func(t *testing.T) {
		tr := newTransport(t, locator{err: errors.New("no port known")}, secretStore{}, localrest.Options{})
		wantCode(t, tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{}),
			plexus.CodeSourceUnavailable, "the svc service could not be located")
		if h := tr.Check(context.Background(), hint); h.Status != plexus.HealthUnavailable {
			t.Fatalf("got health %+v, want unavailable", h)
		}
	})
}

func TestCheck(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) { s.record(r) })
	hint := plexus.LocalServiceHint{App: "svc", DefaultPort: 27123}
	if h := fx.tr.Check(context.Background(), hint); h.Status != plexus.HealthOK {
		t.Fatalf("got health %+v, want ok", h)
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the health check sent %d requests, want none (a dial only)", n)
	}
}

func TestOversize(t *testing.T) {
	const limit = 1024
	fx := newFixtureOpts(t, func(w http.ResponseWriter, r *http.Request) {
		n := limit
		if r.URL.Path != "/exact" {
			n = 2 * limit
		}
		body := strings.Repeat("a", n)
		if r.URL.Path == "/chunked" {
			io.WriteString(w, body[:10])
			http.NewResponseController(w).Flush() // no Content-Length
			io.WriteString(w, body[10:])
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(n))
		io.WriteString(w, body)
	}, localrest.Options{MaxBody: limit})
	for _, path := range []string{"/sized", "/chunked"} {
		t.Run(path, func(t *testing.T) {
			wantCode(t, fx.call(`{"pathTemplate":"`+path+`"}`, nil), plexus.CodeTransportError, "the response exceeds the 1 KiB limit")
		})
	}
	t.Run("HEAD", func(t *testing.T) {
		res := fx.call(`{"method":"HEAD","pathTemplate":"/sized"}`, nil)
		wantOK(t, res)
		if diff := cmp.Diff(map[string]any{"status": 200}, res.Data); diff != "" {
			t.Fatalf("data (-want +got):\n%s", diff)
		}
	})
	t.Run("/exact", func(t *testing.T) {
		res := fx.call(`{"pathTemplate":"/exact"}`, nil)
		wantOK(t, res)
		if got := res.Data.(map[string]any)["text"].(string); len(got) != limit {
			t.Fatalf("got %d bytes, want %d", len(got), limit)
		}
	})
}

func TestLoopbackOnly(t *testing.T) {
	var s seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.record(r) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	for _, tc := range []struct{ name, base, want string }{
		{"PublicIP", "http://192.0.2.1:" + port, `host "192.0.2.1" is not a loopback address`},
		{"PrivateIP", "http://10.0.0.1:" + port, "not a loopback address"},
		{"Unspecified", "http://0.0.0.0:" + port, "not a loopback address"},
		{"Name", "http://example.com:" + port, `host "example.com" is not a loopback address`},
		{"LocalhostLookalike", "http://localhost.example.com:" + port, "not a loopback address"},
		{"MappedPublic", "http://[::ffff:192.0.2.1]:" + port, "not a loopback address"},
		{"HTTPS", "https://127.0.0.1:" + port, `scheme "https" is not http`},
		{"Credentials", "http://u:p@127.0.0.1:" + port, "carries credentials"},
		{"Query", "http://127.0.0.1:" + port + "/?a=b", "carries credentials, a query"},
		{"Garbage", "::", "invalid base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport(t, locator{base: tc.base}, secretStore{}, localrest.Options{})
			res := tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{})
			wantCode(t, res, plexus.CodeTransportError, "local-rest only calls plain http on loopback")
			if !strings.Contains(res.Error.Message, tc.want) {
				t.Fatalf("message %q: want %q", res.Error.Message, tc.want)
			}
			if h := tr.Check(context.Background(), plexus.LocalServiceHint{App: "svc"}); h.Status != plexus.HealthUnavailable {
				t.Fatalf("got health %+v, want unavailable", h)
			}
		})
	}
	for _, tc := range []struct{ name, base string }{
		{"Localhost", "http://localhost:" + port},
		{"LocalhostUpper", "http://LOCALHOST:" + port},
		{"IP", "http://127.0.0.1:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport(t, locator{base: tc.base}, secretStore{}, localrest.Options{})
			wantOK(t, tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{}))
		})
	}
	if n := s.count(); n != 3 {
		t.Fatalf("the server saw %d requests, want 3 (only the loopback bases)", n)
	}
}

func TestConcurrentDispatch(t *testing.T) {
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secretValue {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": strings.TrimPrefix(r.URL.Path, "/items/"), "q": r.URL.Query().Get("q")})
	})
	e := entry(t, `{"pathTemplate":"/items/{id}","secret":{"name":"svc-key"}}`)
	var wg sync.WaitGroup
	errs := make(chan error, 32*8)
	for g := range 32 {
		wg.Go(func() {
			for i := range 8 {
				id, q := fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("q%d", i)
				res := fx.tr.Dispatch(context.Background(), e, map[string]any{"id": id, "q": q}, plexus.DispatchContext{})
				want := map[string]any{"id": id, "q": q}
				if !res.OK {
					errs <- fmt.Errorf("%s: %v", id, res.Error)
				} else if diff := cmp.Diff(want, res.Data); diff != "" {
					errs <- fmt.Errorf("%s: data (-want +got):\n%s", id, diff)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
