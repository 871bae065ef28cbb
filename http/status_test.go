package http

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// wantStatus is the spec's /invoke table (§2) and our choices elsewhere,
// written out independently of statusTable so a change to either shows.
var wantStatus = []struct {
	code          plexus.ErrorCode
	invoke, other int
}{
	{plexus.CodeGrantRequired, 401, 401},
	{plexus.CodeTokenExpired, 401, 401},
	{plexus.CodeTokenRevoked, 401, 401},
	{plexus.CodeSessionExpired, 401, 401},
	{plexus.CodeGrantPendingUser, 401, 401},
	{plexus.CodeHostForbidden, 403, 403},
	{plexus.CodeUnknownCapability, 404, 404},
	{plexus.CodeSchemaValidationFailed, 422, 422},
	{plexus.CodeRateLimited, 429, 429},
	{plexus.CodeSourceUnavailable, 503, 503},
	{plexus.CodeMCPToolError, 200, 502},
	{plexus.CodeTransportError, 200, 502},
	{plexus.CodeInternalError, 400, 500},
	{plexus.CodeMalformed, 400, 400},
	{plexus.CodeInvalidRequest, 400, 400},
	{plexus.CodeUnauthorized, 400, 401},
	{plexus.CodeUnknownCode, 400, 401},
	{plexus.CodeCodeExpired, 400, 401},
	{plexus.CodeCodeConsumed, 400, 401},
	{plexus.CodePersistFailed, 400, 500},
	{plexus.CodeNotFound, 400, 404},
	{plexus.CodeConflict, 400, 409},
	{"no_such_code", 400, 500},
	{"", 400, 500},
}

func TestStatusTableCoversUnion(t *testing.T) {
	for _, c := range plexus.InvokeCodes {
		if _, ok := statusTable[c]; !ok {
			t.Errorf("invoke code %q has no row in statusTable", c)
		}
	}
	if len(statusTable) != len(wantStatus)-2 {
		t.Errorf("statusTable has %d rows, test expects %d: update wantStatus", len(statusTable), len(wantStatus)-2)
	}
}

func TestStatusMapping(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	for _, tc := range wantStatus {
		name := string(tc.code)
		if name == "" {
			name = "empty"
		}
		t.Run("Invoke/"+name, func(t *testing.T) {
			want := plexus.InvokeResponse{
				ID: "cap.x", OK: false, AuditID: "evt_9",
				Error: &plexus.ErrorBody{Code: tc.code, Message: "m", CapabilityID: "cap.x"},
			}
			api.InvokeResp = want
			resp := ts.do(t, "POST", "/invoke", map[string]string{"Authorization": "Bearer tok"}, `{"id":"cap.x"}`)
			if resp.Status != tc.invoke {
				t.Errorf("status = %d, want %d", resp.Status, tc.invoke)
			}
			if diff := cmp.Diff(want, invokeOf(t, resp)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
		t.Run("Manifest/"+name, func(t *testing.T) {
			api.Err = &plexus.Error{Code: tc.code, Message: "m"}
			defer func() { api.Err = nil }()
			resp := ts.do(t, "GET", "/manifest", map[string]string{plexus.SessionHeader: "sess_1"}, "")
			if resp.Status != tc.other {
				t.Errorf("status = %d, want %d", resp.Status, tc.other)
			}
			if got := errorOf(t, resp).Code; got != tc.code {
				t.Errorf("code = %q, want %q", got, tc.code)
			}
		})
	}
	t.Run("InvokeOK", func(t *testing.T) {
		api.InvokeResp = plexus.InvokeResponse{ID: "cap.x", OK: true, Output: map[string]any{"n": 1.0}, AuditID: "evt_1"}
		resp := ts.do(t, "POST", "/invoke", nil, `{"id":"cap.x","input":{"a":1}}`)
		if resp.Status != 200 {
			t.Errorf("status = %d, want 200", resp.Status)
		}
		if diff := cmp.Diff(api.InvokeResp, invokeOf(t, resp)); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
		_, _, arg := api.Last(t)
		want := plexus.InvokeRequest{ID: "cap.x", Input: map[string]any{"a": 1.0}}
		if diff := cmp.Diff(want, arg); diff != "" {
			t.Errorf("request (-want +got):\n%s", diff)
		}
	})
}

func TestInternalErrorNotLeaked(t *testing.T) {
	api := &stubAPI{Err: json.Unmarshal([]byte("{"), new(any))}
	ts := mustServe(t, api, Options{})
	resp := ts.do(t, "GET", "/manifest", nil, "")
	if resp.Status != 500 {
		t.Errorf("status = %d, want 500", resp.Status)
	}
	if diff := cmp.Diff(&plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "internal error"}, errorOf(t, resp)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestRetryAfter(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	t.Run("Invoke", func(t *testing.T) {
		api.InvokeResp = plexus.InvokeResponse{ID: "x", Error: &plexus.ErrorBody{
			Code: plexus.CodeRateLimited, Detail: map[string]any{"retryAfterSeconds": 2.5}}}
		resp := ts.do(t, "POST", "/invoke", nil, `{"id":"x"}`)
		if resp.Status != 429 || resp.Header.Get("Retry-After") != "3" {
			t.Errorf("status %d Retry-After %q, want 429 \"3\"", resp.Status, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("Envelope", func(t *testing.T) {
		api.Err = &plexus.Error{Code: plexus.CodeRateLimited, Message: "slow down", Detail: struct {
			RetryAfter int `json:"retryAfter"`
		}{7}}
		defer func() { api.Err = nil }()
		resp := ts.do(t, "GET", "/grants", nil, "")
		if resp.Status != 429 || resp.Header.Get("Retry-After") != "7" {
			t.Errorf("status %d Retry-After %q, want 429 \"7\"", resp.Status, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		api.Err = &plexus.Error{Code: plexus.CodeRateLimited, Message: "slow down"}
		defer func() { api.Err = nil }()
		resp := ts.do(t, "GET", "/grants", nil, "")
		if resp.Status != 429 || resp.Header.Get("Retry-After") != "" {
			t.Errorf("status %d Retry-After %q, want 429 and none", resp.Status, resp.Header.Get("Retry-After"))
		}
	})
}
