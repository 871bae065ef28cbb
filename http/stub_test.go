package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// stubAPI is the state of a stubbed gateway: it records every call, and
// its fields shape the answers. Err, when set, is what every error-returning
// method answers. Each handler group's stub (stubAgents, stubInvoke,
// stubEvents, stubAdmin …, beside the tests of that group) is a view of it
// with only that group's methods; backend serves every group from it.
type stubAPI struct {
	mu    sync.Mutex
	calls []string
	creds []gateway.Credentials
	args  []any

	Err             error
	AdminErr        error // AdminCheck's answer
	InvokeResp      plexus.InvokeResponse
	Progress        []plexus.InvokeProgressEvent // InvokeStream hands these to its sink first
	ManifestEntries []plexus.Entry               // the entries of the manifest a handshake or GET /manifest streams
	Token           *plexus.ScopedToken
	Pending         *plexus.GrantPendingResponse
	AddedSource     *plexus.SourceConfig
	SourceList      []plexus.SourceConfig
	Events          chan plexus.Event
	SubCtx          chan context.Context // receives each Subscribe ctx
}

// backend serves every handler group from s.
func (s *stubAPI) backend() Backend {
	return Backend{Agents: stubAgents{s}, Grants: stubGrants{s}, Invoke: stubInvoke{s}, Events: stubEvents{s},
		Extensions: stubExtensions{s}, Owner: stubOwner{s}, Admin: stubAdmin{s}, Decisions: stubDecisions{s}, Sources: stubSources{s}}
}

// backend lets a test serve only the groups it names.
func (b Backend) backend() Backend { return b }

func (s *stubAPI) record(name string, c gateway.Credentials, arg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
	s.creds = append(s.creds, c)
	s.args = append(s.args, arg)
}

// Calls returns the names of the methods called so far.
func (s *stubAPI) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Last returns the credentials and argument of the last call.
func (s *stubAPI) Last(tb testing.TB) (string, gateway.Credentials, any) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		tb.Fatal("gateway was never called")
	}
	n := len(s.calls) - 1
	return s.calls[n], s.creds[n], s.args[n]
}

// testServer is a Server serving on a real 127.0.0.1:0 listener.
type testServer struct {
	*Server
	Addr string // 127.0.0.1:port
	Port int
}

// mustServe starts srv on a fresh loopback port; cleanup stops it and
// fails the test if Serve does not return cleanly.
func mustServe(tb testing.TB, api interface{ backend() Backend }, opts Options) *testServer {
	tb.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	srv := New(api.backend(), opts)
	ln, err := srv.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			tb.Error("Serve did not return after cancel")
		}
	})
	return &testServer{Server: srv, Addr: ln.Addr().String(), Port: srv.Port()}
}

// rawResponse is a response read off the wire, body included.
type rawResponse struct {
	Status int
	Header nethttp.Header
	Body   []byte
}

// rawDo writes one HTTP/1.1 request byte for byte (so Host can be anything,
// even empty) and reads the response.
func rawDo(tb testing.TB, addr, method, path, host string, hdr map[string]string, body string) rawResponse {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, host)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if body != "" || method == "POST" || method == "PUT" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		tb.Fatal(err)
	}
	resp, err := nethttp.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// do sends a request with a valid Host through rawDo.
func (ts *testServer) do(tb testing.TB, method, path string, hdr map[string]string, body string) rawResponse {
	tb.Helper()
	return rawDo(tb, ts.Addr, method, path, ts.Addr, hdr, body)
}

// errorOf decodes an ErrorResponse envelope, failing if r is not one.
func errorOf(tb testing.TB, r rawResponse) *plexus.ErrorBody {
	tb.Helper()
	var env plexus.ErrorResponse
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Error == nil {
		tb.Fatalf("body %q is not an ErrorResponse (err %v)", r.Body, err)
	}
	return env.Error
}

// invokeOf decodes an InvokeResponse, failing unless it has the exact keys
// of the invoke shape (ok present and auditId present).
func invokeOf(tb testing.TB, r rawResponse) plexus.InvokeResponse {
	tb.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &keys); err != nil {
		tb.Fatalf("body %q is not JSON: %v", r.Body, err)
	}
	for _, k := range []string{"id", "ok", "auditId"} {
		if _, ok := keys[k]; !ok {
			tb.Fatalf("body %q lacks %q: not an InvokeResponse", r.Body, k)
		}
	}
	var ir plexus.InvokeResponse
	if err := json.Unmarshal(r.Body, &ir); err != nil {
		tb.Fatal(err)
	}
	return ir
}
