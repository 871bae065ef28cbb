package http

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

func TestBadBodies(t *testing.T) {
	api := &stubAPI{InvokeResp: plexus.InvokeResponse{OK: true}}
	ts := mustServe(t, api, Options{MaxBodyBytes: 64})
	big := `{"code":"` + strings.Repeat("a", 100) + `"}`
	bigInvoke := `{"id":"cap.x","input":{"q":"` + strings.Repeat("a", 100) + `"}}`

	type bodyCase struct {
		name, body string
		status     int
		id         string // the id an invoke denial echoes
	}
	cases := []bodyCase{
		{"NotJSON", `{"code":`, 400, ""},
		{"Garbage", `hello`, 400, ""},
		{"Empty", ``, 400, ""},
		{"Whitespace", "  \n", 400, ""},
		{"Null", `null`, 400, ""},
		{"Trailing", `{"code":"a"} {"code":"b"}`, 400, ""},
		{"TrailingGarbage", `{"code":"a"}x`, 400, ""},
		{"Array", `[1,2]`, 400, ""},
		{"Oversize", big, 413, ""},
	}
	for _, tc := range cases {
		t.Run("Enroll/"+tc.name, func(t *testing.T) {
			before := len(api.Calls())
			resp := ts.do(t, "POST", "/agents/enroll", nil, tc.body)
			if resp.Status != tc.status {
				t.Errorf("status = %d, want %d (%s)", resp.Status, tc.status, resp.Body)
			}
			if got := errorOf(t, resp).Code; got != plexus.CodeMalformed {
				t.Errorf("code = %q, want malformed", got)
			}
			if calls := api.Calls()[before:]; len(calls) != 0 {
				t.Errorf("gateway called: %v", calls)
			}
		})
	}

	invokeCases := append(cases[:len(cases)-1:len(cases)-1],
		bodyCase{"Oversize", bigInvoke, 413, ""},
		bodyCase{"NoID", `{"input":{}}`, 422, ""},
		bodyCase{"InputNotObject", `{"id":"cap.x","input":5}`, 422, "cap.x"},
		bodyCase{"IDNotString", `{"id":5}`, 422, ""},
	)
	for _, tc := range invokeCases {
		t.Run("Invoke/"+tc.name, func(t *testing.T) {
			before := len(api.Calls())
			resp := ts.do(t, "POST", "/invoke", nil, tc.body)
			want := tc.status
			if want == 400 {
				want = 422
			}
			if resp.Status != want {
				t.Errorf("status = %d, want %d (%s)", resp.Status, want, resp.Body)
			}
			ir := invokeOf(t, resp)
			if ir.OK || ir.AuditID != "" || ir.ID != tc.id || ir.Error == nil || ir.Error.Code != plexus.CodeSchemaValidationFailed {
				t.Errorf("denial = %s", resp.Body)
			}
			if calls := api.Calls()[before:]; len(calls) != 0 {
				t.Errorf("gateway called: %v", calls)
			}
		})
	}

	t.Run("ExtraFieldsAccepted", func(t *testing.T) {
		resp := ts.do(t, "POST", "/agents/enroll", nil, `{"code":"c","future":1}`)
		if resp.Status != 200 {
			t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
		}
		_, _, arg := api.Last(t)
		if diff := cmp.Diff(plexus.EnrollRequest{Code: "c"}, arg); diff != "" {
			t.Errorf("request (-want +got):\n%s", diff)
		}
	})
	t.Run("HandshakeEmptyBodyOK", func(t *testing.T) {
		resp := ts.do(t, "POST", "/link/handshake", map[string]string{"Authorization": "Bearer plx_agent_a"}, "")
		if resp.Status != 200 {
			t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
		}
	})
	t.Run("AdminBadBodyUnauthorizedFirst", func(t *testing.T) {
		api.AdminErr = &plexus.Error{Code: plexus.CodeUnauthorized, Message: "no key"}
		defer func() { api.AdminErr = nil }()
		resp := ts.do(t, "POST", "/admin/api/agents/connect", nil, `{`)
		if resp.Status != 401 || errorOf(t, resp).Code != plexus.CodeUnauthorized {
			t.Errorf("got %d %s, want 401 unauthorized", resp.Status, resp.Body)
		}
	})
	t.Run("AdminBadBodyMalformed", func(t *testing.T) {
		resp := ts.do(t, "POST", "/admin/api/agents/connect", nil, `{`)
		if resp.Status != 400 || errorOf(t, resp).Code != plexus.CodeMalformed {
			t.Errorf("got %d %s, want 400 malformed", resp.Status, resp.Body)
		}
		if diff := cmp.Diff([]string{"AdminCheck"}, api.Calls()[len(api.Calls())-1:]); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
	})
}

func TestCredentials(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	resp := ts.do(t, "GET", "/manifest", map[string]string{
		"Authorization":            "bearer   plx_agent_abc",
		plexus.ConnectionKeyHeader: "plx_live_k",
		plexus.SessionHeader:       "sess_1",
		plexus.ViaHeader:           "cli",
	}, "")
	if resp.Status != 200 {
		t.Fatalf("status = %d", resp.Status)
	}
	_, c, _ := api.Last(t)
	if !strings.HasPrefix(c.Remote, "127.0.0.1:") {
		t.Errorf("Remote = %q", c.Remote)
	}
	// The lookup itself is tested on a live connection in peer_test.go; by
	// now this request's connection may be gone.
	if c.PeerUID == nil {
		t.Error("PeerUID lookup not passed to the gateway")
	}
	c.Remote, c.PeerUID = "", nil
	want := gateway.Credentials{Bearer: "plx_agent_abc", ConnectionKey: "plx_live_k", SessionID: "sess_1", Via: "cli"}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}

	ts.do(t, "GET", "/manifest", map[string]string{"Authorization": "Basic dXNlcg=="}, "")
	if _, c, _ := api.Last(t); c.Bearer != "" {
		t.Errorf("Basic auth read as Bearer %q", c.Bearer)
	}
}

// TestReadBodyFastPath: the one-scan path for a body holding exactly one
// value answers what the streaming decoder answers for the same bytes.
func TestReadBodyFastPath(t *testing.T) {
	s := &Server{opts: Options{MaxBodyBytes: 1 << 10}}
	for _, body := range []string{
		`{"id":"a"}`, " \n{\"id\":\"a\", \"input\":{\"x\":[1,2,{}]}}\r\n\t", `null`, " null ", `[1,2]`, `"s"`, `5`,
		``, "  \n", `{"a":1} {"b":2}`, `{"a":1}x`, `{"a":`, `hello`,
	} {
		r := httptest.NewRequest("POST", "/invoke", strings.NewReader(body))
		got, gotErr := s.readBody(httptest.NewRecorder(), r)
		want, wantErr := decodeOne(strings.NewReader(body))
		if string(got) != string(want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("readBody(%q) = %q, %v; decoder says %q, %v", body, got, gotErr, want, wantErr)
		}
	}
}
