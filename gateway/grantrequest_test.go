package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// TestRequestSession: the body's sessionId and the session header must
// agree when both are sent; either alone names the session.
func TestRequestSession(t *testing.T) {
	tests := []struct {
		name, header, body, want string
		code                     plexus.ErrorCode
	}{
		{name: "Header", header: "sess_1", want: "sess_1"},
		{name: "Body", body: "sess_2", want: "sess_2"},
		{name: "Both", header: "sess_1", body: "sess_1", want: "sess_1"},
		{name: "ErrDisagree", header: "sess_1", body: "sess_2", code: plexus.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := requestSession(Credentials{SessionID: tc.header}, plexus.GrantRequest{SessionID: tc.body})
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if got != tc.want || code != tc.code {
				t.Errorf("requestSession = %q, %v; want %q, code %q", got, err, tc.want, tc.code)
			}
		})
	}
}

func TestCheckGrantRequest(t *testing.T) {
	many := map[string]plexus.GrantDecision{}
	for i := range maxGrantsPerRequest + 1 {
		many[strings.Repeat("x", i+1)] = plexus.GrantDecision{Decision: plexus.DecisionAllow}
	}
	one := map[string]plexus.GrantDecision{"fs.read": {Decision: plexus.DecisionAllow}}
	tests := []struct {
		name string
		req  plexus.GrantRequest
		code plexus.ErrorCode
	}{
		{name: "OK", req: plexus.GrantRequest{Grants: one}},
		{name: "OKBundle", req: plexus.GrantRequest{Grants: one, Bundle: &plexus.BundleRequest{Name: "triage"}}},
		{name: "ErrEmpty", req: plexus.GrantRequest{}, code: plexus.CodeInvalidRequest},
		{name: "ErrTooMany", req: plexus.GrantRequest{Grants: many}, code: plexus.CodeInvalidRequest},
		{name: "ErrBundleUnnamed", req: plexus.GrantRequest{Grants: one, Bundle: &plexus.BundleRequest{Name: "  "}}, code: plexus.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkGrantRequest(tc.req)
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if code != tc.code {
				t.Errorf("checkGrantRequest = %v, want code %q", err, tc.code)
			}
		})
	}
}

// TestGrantAnswer: what RequestGrants answers for each combination of what
// its transaction committed.
func TestGrantAnswer(t *testing.T) {
	url := func(p string) string { return "http://127.0.0.1:7077" + p }
	declined := []plexus.Declined{{ID: "fs.write", Reason: "denied by policy default"}}
	pend := &plexus.Pending{ID: "pend_1", Items: []plexus.PendingItem{{CapabilityID: "fs.exec"}}}
	tok := func() *plexus.ScopedToken { return &plexus.ScopedToken{JTI: "tok_1"} }

	t.Run("Pending", func(t *testing.T) {
		// The declined travel once, in the notice, not again in its partial token.
		partial := &plexus.ScopedToken{JTI: "tok_1", Declined: declined}
		st, pr, err := grantAnswer(partial, pend, declined, false, url)
		want := &plexus.GrantPendingResponse{Status: plexus.CodeGrantPendingUser, PendingID: "pend_1", Pending: []string{"fs.exec"},
			StatusURL: "http://127.0.0.1:7077/grants/status?pendingId=pend_1", PartialToken: &plexus.ScopedToken{JTI: "tok_1"}, Declined: declined}
		if st != nil || err != nil {
			t.Fatalf("token %+v, err %v; want a pending notice only", st, err)
		}
		if diff := cmp.Diff(want, pr); diff != "" {
			t.Errorf("pending notice (-want +got):\n%s", diff)
		}
	})
	t.Run("Token", func(t *testing.T) {
		st, pr, err := grantAnswer(tok(), nil, declined, false, url)
		if pr != nil || err != nil || st == nil || st.JTI != "tok_1" || !cmp.Equal(st.Declined, declined) {
			t.Errorf("answer = %+v, %+v, %v; want the token listing what was declined", st, pr, err)
		}
	})
	t.Run("RelinquishedOnly", func(t *testing.T) {
		st, pr, err := grantAnswer(nil, nil, nil, true, url)
		if pr != nil || err != nil || st == nil || st.Token != "" || st.Scopes == nil || len(st.Scopes) != 0 {
			t.Errorf("answer = %+v, %+v, %v; want an empty token with empty scopes", st, pr, err)
		}
	})
	t.Run("ErrNothingIssued", func(t *testing.T) {
		for _, relinquished := range []bool{false, true} {
			st, pr, err := grantAnswer(nil, nil, declined, relinquished, url)
			e := plexus.AsError(err)
			if st != nil || pr != nil || e == nil || e.Code != plexus.CodeGrantRequired || !strings.Contains(e.Message, "fs.write: denied by policy default") {
				t.Errorf("relinquished %v: answer = %+v, %+v, %v; want grant_required naming the declined", relinquished, st, pr, err)
			}
		}
	})
}

func TestMintTrace(t *testing.T) {
	tests := []struct {
		name    string
		allowed []plexus.Grant
		want    string
	}{
		{name: "OneGrantJoinsItsStory", allowed: []plexus.Grant{{TraceID: "tr_grant"}}, want: "tr_grant"},
		{name: "OneGrantWithoutTrace", allowed: []plexus.Grant{{}}, want: "tr_req"},
		{name: "Several", allowed: []plexus.Grant{{TraceID: "tr_a"}, {TraceID: "tr_b"}}, want: "tr_req"},
	}
	for _, tc := range tests {
		if got := mintTrace(tc.allowed, "tr_req"); got != tc.want {
			t.Errorf("%s: mintTrace = %q, want %q", tc.name, got, tc.want)
		}
	}
}
