package http

import (
	"bytes"
	"encoding/json"
	nethttp "net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// fuzzMaxBody is the body cap FuzzBodies serves with: small, so that the
// fuzzer reaches it.
const fuzzMaxBody = 4096

// bodyEndpoint is one endpoint that decodes a JSON body: where it is, the
// gateway method it hands the decoded value to, and what that value must
// be for a body that json.Unmarshal reads (want returns it, or an error
// when the handler must refuse a body it reads).
type bodyEndpoint struct {
	method, path, call string
	// optional: an absent body (or null) is read as an empty request.
	optional bool
	want     func(b []byte) (any, error)
}

// decodeAs is the reference decoding of a body into a T.
func decodeAs[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

func asIs[T any](b []byte) (any, error) { return decodeAs[T](b) }

// decideWant is what AdminDecide receives for a body on a path whose action
// is pathAction ("" for the bare path).
func decideWant(pathAction string) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		req, err := decodeAs[plexus.DecideRequest](b)
		switch {
		case err != nil:
			return nil, err
		case pathAction != "" && req.Action != "" && req.Action != pathAction:
			return nil, plexus.Errorf(plexus.CodeInvalidRequest, "contradicts the path")
		case pathAction != "":
			req.Action = pathAction
		case req.Action != "approve" && req.Action != "deny":
			return nil, plexus.Errorf(plexus.CodeInvalidRequest, "no action")
		}
		return []any{"pend_1", req}, nil
	}
}

// bodyEndpoints lists every endpoint with a JSON body; FuzzBodies picks one
// by its first argument.
func bodyEndpoints() []bodyEndpoint {
	return []bodyEndpoint{
		{"POST", "/agents/enroll", "Enroll", false, asIs[plexus.EnrollRequest]},
		{"POST", "/link/handshake", "Handshake", true, asIs[plexus.HandshakeRequest]},
		{"PUT", "/grants", "RequestGrants", false, asIs[plexus.GrantRequest]},
		{"POST", "/grants/refresh", "Refresh", false, asIs[plexus.RefreshRequest]},
		{"POST", "/grants/revoke", "Revoke", false, asIs[plexus.RevokeRequest]},
		{"POST", "/invoke", "Invoke", false, func(b []byte) (any, error) {
			req, err := decodeAs[plexus.InvokeRequest](b)
			if err == nil && req.ID == "" {
				return nil, plexus.Errorf(plexus.CodeSchemaValidationFailed, "no id")
			}
			return req, err
		}},
		{"POST", "/extensions", "RegisterExtension", false, asIs[plexus.ExtensionRegisterRequest]},
		{"POST", "/admin/api/agents/connect", "ConnectAgent", false, func(b []byte) (any, error) {
			body, err := decodeAs[connectBody](b)
			if err != nil || !body.selects() {
				return body.ConnectRequest, err
			}
			sel, err := body.selection()
			return []any{body.ConnectRequest, sel}, err
		}},
		{"POST", "/admin/api/agents/revoke", "RevokeAgent", false, asIs[plexus.AgentRevokeRequest]},
		{"POST", "/admin/api/pending/pend_1/approve", "AdminDecide", true, decideWant("approve")},
		{"POST", "/admin/api/pending/pend_1/deny", "AdminDecide", true, decideWant("deny")},
		{"POST", "/admin/api/pending/pend_1", "AdminDecide", false, decideWant("")},
		{"POST", "/admin/api/sources", "AddSource", false, func(b []byte) (any, error) {
			v, err := decodeAs[SourceView](b)
			return plexus.SourceConfig{ID: v.ID, Kind: v.Kind, Provenance: v.Provenance, Config: v.Config}, err
		}},
		{"POST", "/admin/api/extensions", "AddExtension", false, func(b []byte) (any, error) {
			v, err := decodeAs[plexus.ExtensionRegisterRequest](b)
			return v.Manifest, err
		}},
	}
}

// FuzzBodies sends a fuzzed body to one endpoint (picked by the first
// argument) of a real Server over a recording gateway. Properties:
//   - nothing panics, and every answer is JSON;
//   - a body over the cap is 413 and never reaches the gateway;
//   - a body the gateway receives is exactly one JSON value, decoded as
//     json.Unmarshal decodes it, and re-encodes to a fixed point;
//   - a body refused at the edge is a typed error: malformed or
//     invalid_request (schema_validation_failed on /invoke), 400, 413 or
//     422, and the gateway never saw it.
func FuzzBodies(f *testing.F) {
	for i, seed := range []string{
		`{"code":"123456"}`, `{"connectionKey":"k","client":{"name":"c","version":"1"}}`,
		`{"sessionId":"s","grants":{"portal.notes.read":{"verbs":["read"],"trustWindow":{"kind":"1h"}}},"bundle":{"purpose":"p"}}`,
		`{"sessionId":"s","jti":"j"}`, `{"jti":"j","reason":"r"}`, `{"id":"portal.notes.read","input":{"path":"a.md"},"idempotencyKey":"k"}`,
		`{"sessionId":"s","manifest":{"manifest":"plexus-extension/0.1","source":"a","capabilities":[{"name":"x.y","route":{"bin":"sh"}}]}}`,
		`{"agentId":"a","label":"A","grants":[{"id":"x","verbs":["read"]}]}`, `{"agentId":"a","reason":"r"}`,
		`{"action":"approve","verbs":["read"],"trustWindow":{"kind":"custom","ms":1000},"capabilities":["x"]}`,
		`{"action":"approve"}`, `{"action":"deny","reason":"no"}`,
		`{"id":"s","kind":"portal","config":{"root":"/tmp"},"createdAt":"2026-01-01T00:00:00Z"}`,
		`{"manifest":{"source":"a"}}`,
	} {
		f.Add(uint8(i), seed)
	}
	endpoints := bodyEndpoints()
	for i, ep := range endpoints {
		if ep.path == "/admin/api/agents/connect" { // the other implementation's form
			f.Add(uint8(i), `{"agentId":"a","agentType":"claude-code","capabilities":["x"],"standing":["x"],"trustWindow":{"kind":"7d"}}`)
			f.Add(uint8(i), `{"agentId":"a","capabilities":["x"],"ttlMs":1000}`)
		}
	}
	for i := range endpoints {
		for _, s := range []string{``, `null`, ` null `, `{}`, `[]`, `"x"`, `{} {}`, `{"a":1}x`, `{"id":1}`, "\xff",
			`{"sessionId":"other"}`, strings.Repeat(" ", fuzzMaxBody) + `{}`} {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		ep := endpoints[int(which)%len(endpoints)]
		api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "x", OK: true, AuditID: "evt_1"},
			Token: &plexus.ScopedToken{Token: "t"}}
		srv := New(api.backend(), Options{Addr: "127.0.0.1:7077", MaxBodyBytes: fuzzMaxBody})
		req := httptest.NewRequest(ep.method, ep.path, strings.NewReader(body))
		req.Host = "127.0.0.1:7077"
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set(plexus.ConnectionKeyHeader, "key")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)

		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: status %d, body %q is not JSON", ep.method, ep.path, rec.Code, rec.Body.Bytes())
		}
		calls := slices.DeleteFunc(api.Calls(), func(c string) bool { return c == "AdminCheck" })
		if len(body) > fuzzMaxBody {
			if rec.Code != nethttp.StatusRequestEntityTooLarge || len(calls) > 0 {
				t.Fatalf("%s: a %d-byte body answered %d and reached %v", ep.path, len(body), rec.Code, calls)
			}
			return
		}
		if len(calls) == 0 {
			requireEdgeRefusal(t, ep, body, rec)
			return
		}
		if len(calls) != 1 || calls[0] != ep.call {
			t.Fatalf("%s: the gateway saw %v, want one %s", ep.path, calls, ep.call)
		}
		_, _, got := api.Last(t)
		want, err := referenceBody(ep, body)
		if err != nil {
			t.Fatalf("%s: the gateway received %+v for a body the reference refuses (%v): %q", ep.path, got, err, body)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: the gateway received another value than the body says (-want +got):\n%s", ep.path, diff)
		}
		if pair, ok := got.([]any); ok { // AdminDecide's id and request
			got = pair[1]
		}
		requireReencodes(t, got)
	})
}

// referenceBody is what the gateway must receive for body, as the server
// reads bodies: whitespace around one JSON value, an absent body or null
// meaning no value (refused where a body is required).
func referenceBody(ep bodyEndpoint, body string) (any, error) {
	v := trimJSONSpace([]byte(body))
	if len(v) == 0 || string(v) == "null" {
		if !ep.optional {
			return nil, errEmptyBody
		}
		v = []byte("{}")
	}
	return ep.want(v)
}

// requireEdgeRefusal checks the answer to a body the gateway never saw.
func requireEdgeRefusal(t *testing.T, ep bodyEndpoint, body string, rec *httptest.ResponseRecorder) {
	t.Helper()
	var env struct {
		Error *plexus.ErrorBody `json:"error"`
		OK    *bool             `json:"ok"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error == nil {
		t.Fatalf("%s: refused %q without an error body: %d %s", ep.path, body, rec.Code, rec.Body.Bytes())
	}
	codes := []plexus.ErrorCode{plexus.CodeMalformed, plexus.CodeInvalidRequest}
	if ep.call == "Invoke" {
		codes = []plexus.ErrorCode{plexus.CodeSchemaValidationFailed}
	}
	if !slices.Contains(codes, env.Error.Code) {
		t.Fatalf("%s: refused %q with code %s, want one of %v", ep.path, body, env.Error.Code, codes)
	}
	if !slices.Contains([]int{400, 413, 422}, rec.Code) {
		t.Fatalf("%s: refused %q with status %d", ep.path, body, rec.Code)
	}
	if _, err := referenceBody(ep, body); err == nil {
		t.Fatalf("%s: refused %q, which the reference reads: %s", ep.path, body, rec.Body.Bytes())
	}
}

// requireReencodes checks that v encodes, decodes into its own type and
// encodes again to the same bytes.
func requireReencodes(t *testing.T, v any) {
	t.Helper()
	b1, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("the decoded value does not encode: %v", err)
	}
	p := reflect.New(reflect.TypeOf(v))
	if err := json.Unmarshal(b1, p.Interface()); err != nil {
		t.Fatalf("the encoding %s does not decode: %v", b1, err)
	}
	b2, err := json.Marshal(p.Elem().Interface())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("encoding is not a fixed point:\n%s\n%s", b1, b2)
	}
}
