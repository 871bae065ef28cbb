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

// stubAPI is a gateway.API that records every call. Err, when set, is what
// every error-returning method answers; the other fields shape successes.
type stubAPI struct {
	mu    sync.Mutex
	calls []string
	creds []gateway.Credentials
	args  []any

	Err         error
	AdminErr    error // AdminCheck's answer
	InvokeResp  plexus.InvokeResponse
	Progress    []plexus.InvokeProgressEvent // InvokeStream hands these to its sink first
	Token       *plexus.ScopedToken
	Pending     *plexus.GrantPendingResponse
	AddedSource *plexus.SourceConfig
	SourceList  []plexus.SourceConfig
	Events      chan plexus.Event
	SubCtx      chan context.Context // receives each Subscribe ctx
}

var _ gateway.API = (*stubAPI)(nil)

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

func (s *stubAPI) WellKnown() plexus.WellKnownDocument {
	s.record("WellKnown", gateway.Credentials{}, nil)
	return plexus.WellKnownDocument{Gateway: plexus.GatewayInfo{Name: "plexus", Protocol: plexus.ProtocolFamily}}
}

func (s *stubAPI) Enroll(_ context.Context, remote string, req plexus.EnrollRequest) (plexus.EnrollResponse, error) {
	s.record("Enroll", gateway.Credentials{Remote: remote}, req)
	return plexus.EnrollResponse{PAT: "plx_agent_x", AgentID: "a1"}, s.Err
}

func (s *stubAPI) Handshake(_ context.Context, c gateway.Credentials, req plexus.HandshakeRequest) (plexus.HandshakeResponse, error) {
	s.record("Handshake", c, req)
	return plexus.HandshakeResponse{SessionID: "sess_1"}, s.Err
}

func (s *stubAPI) Manifest(_ context.Context, c gateway.Credentials) (plexus.ManifestResponse, error) {
	s.record("Manifest", c, nil)
	return plexus.ManifestResponse{}, s.Err
}

func (s *stubAPI) RequestGrants(_ context.Context, c gateway.Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error) {
	s.record("RequestGrants", c, req)
	return s.Token, s.Pending, s.Err
}

func (s *stubAPI) GrantStatus(_ context.Context, c gateway.Credentials, id string) (plexus.GrantStatusResponse, error) {
	s.record("GrantStatus", c, id)
	return plexus.GrantStatusResponse{PendingID: id, State: plexus.StatePending}, s.Err
}

func (s *stubAPI) Refresh(_ context.Context, c gateway.Credentials, req plexus.RefreshRequest) (plexus.RefreshResponse, error) {
	s.record("Refresh", c, req)
	return plexus.RefreshResponse{}, s.Err
}

func (s *stubAPI) Revoke(_ context.Context, c gateway.Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error) {
	s.record("Revoke", c, req)
	return plexus.RevokeResponse{OK: true}, s.Err
}

func (s *stubAPI) StandingGrants(_ context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error) {
	s.record("StandingGrants", c, nil)
	return plexus.GrantsListResponse{Grants: []plexus.StandingGrant{}}, s.Err
}

func (s *stubAPI) Invoke(_ context.Context, c gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse {
	s.record("Invoke", c, req)
	return s.InvokeResp
}

func (s *stubAPI) InvokeStream(_ context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse {
	s.record("InvokeStream", c, req)
	for _, ev := range s.Progress {
		sink(ev)
	}
	return s.InvokeResp
}

func (s *stubAPI) Subscribe(ctx context.Context, c gateway.Credentials, last int64) (<-chan plexus.Event, error) {
	s.record("Subscribe", c, last)
	if s.Err != nil {
		return nil, s.Err
	}
	if s.SubCtx != nil {
		s.SubCtx <- ctx
	}
	return s.Events, nil
}

func (s *stubAPI) AdminCheck(_ context.Context, c gateway.Credentials) error {
	s.record("AdminCheck", c, nil)
	return s.AdminErr
}

func (s *stubAPI) ConnectAgent(_ context.Context, c gateway.Credentials, req plexus.ConnectRequest) (plexus.ConnectResponse, error) {
	s.record("ConnectAgent", c, req)
	return plexus.ConnectResponse{AgentID: req.AgentID}, s.Err
}

func (s *stubAPI) RevokeAgent(_ context.Context, c gateway.Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error) {
	s.record("RevokeAgent", c, req)
	return plexus.AgentRevokeResponse{OK: true}, s.Err
}

func (s *stubAPI) AdminGrants(_ context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error) {
	s.record("AdminGrants", c, nil)
	return plexus.GrantsListResponse{}, s.Err
}

func (s *stubAPI) AdminShowPending(_ context.Context, c gateway.Credentials, id string) (plexus.Pending, error) {
	s.record("AdminShowPending", c, id)
	return plexus.Pending{ID: id}, s.Err
}

func (s *stubAPI) AdminPending(_ context.Context, c gateway.Credentials) (plexus.PendingListResponse, error) {
	s.record("AdminPending", c, nil)
	return plexus.PendingListResponse{}, s.Err
}

func (s *stubAPI) AdminDecide(_ context.Context, c gateway.Credentials, id string, req plexus.DecideRequest) (plexus.Pending, error) {
	s.record("AdminDecide", c, []any{id, req})
	return plexus.Pending{ID: id}, s.Err
}

func (s *stubAPI) RotateKey(_ context.Context, c gateway.Credentials) (plexus.KeyRotateResponse, error) {
	s.record("RotateKey", c, nil)
	return plexus.KeyRotateResponse{}, s.Err
}

func (s *stubAPI) Integration(_ context.Context, c gateway.Credentials, agentID string) (plexus.IntegrationResponse, error) {
	s.record("Integration", c, agentID)
	return plexus.IntegrationResponse{AgentID: agentID}, s.Err
}

func (s *stubAPI) AdminAgents(_ context.Context, c gateway.Credentials) ([]plexus.Agent, error) {
	s.record("AdminAgents", c, nil)
	return nil, s.Err
}

func (s *stubAPI) RegisterExtension(_ context.Context, c gateway.Credentials, req plexus.ExtensionRegisterRequest) (plexus.ExtensionRegisterResponse, error) {
	s.record("RegisterExtension", c, req)
	return plexus.ExtensionRegisterResponse{}, s.Err
}

func (s *stubAPI) AddExtension(_ context.Context, c gateway.Credentials, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error) {
	s.record("AddExtension", c, m)
	return plexus.ExtensionRegisterResponse{OK: true, Source: m.Source}, s.Err
}

func (s *stubAPI) RemoveExtension(_ context.Context, c gateway.Credentials, source string) error {
	s.record("RemoveExtension", c, source)
	return s.Err
}

func (s *stubAPI) AddSource(_ context.Context, c gateway.Credentials, cfg plexus.SourceConfig, _ gateway.SourceOptions) (plexus.SourceConfig, error) {
	s.record("AddSource", c, cfg)
	if s.AddedSource != nil {
		return *s.AddedSource, s.Err
	}
	return cfg, s.Err
}

func (s *stubAPI) RemoveSource(_ context.Context, c gateway.Credentials, id string, _ gateway.SourceOptions) error {
	s.record("RemoveSource", c, id)
	return s.Err
}

func (s *stubAPI) Sources(_ context.Context, c gateway.Credentials) ([]plexus.SourceConfig, error) {
	s.record("Sources", c, nil)
	return s.SourceList, s.Err
}

func (s *stubAPI) Status(_ context.Context, c gateway.Credentials) (plexus.StatusResponse, error) {
	s.record("Status", c, nil)
	return plexus.StatusResponse{}, s.Err
}

// testServer is a Server serving on a real 127.0.0.1:0 listener.
type testServer struct {
	*Server
	Addr string // 127.0.0.1:port
	Port int
}

// mustServe starts srv on a fresh loopback port; cleanup stops it and
// fails the test if Serve does not return cleanly.
func mustServe(tb testing.TB, api gateway.API, opts Options) *testServer {
	tb.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	srv := New(api, opts)
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
