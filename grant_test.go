package plexus

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGrantDecisionUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    GrantDecision
		wantErr bool
	}{
		{`"allow"`, GrantDecision{Decision: DecisionAllow}, false},
		{`"deny"`, GrantDecision{Decision: DecisionDeny}, false},
		{`{"decision":"allow","verbs":["write"],"purpose":"p"}`, GrantDecision{Decision: DecisionAllow, Verbs: []Verb{VerbWrite}, Purpose: "p"}, false},
		{`{"decision":"allow","trustWindow":{"kind":"1d"}}`, GrantDecision{Decision: DecisionAllow, TrustWindow: &TrustWindow{Kind: Window1d}}, false},
		{`"maybe"`, GrantDecision{}, true},
		{`{"decision":"yes"}`, GrantDecision{}, true},
		{`{}`, GrantDecision{}, true},
		{`42`, GrantDecision{}, true},
		{`{"decision":"allow","verbs":"write"}`, GrantDecision{}, true},
	}
	for _, tt := range tests {
		var got GrantDecision
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err != nil) != tt.wantErr {
			t.Errorf("Unmarshal(%s) err = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
			t.Errorf("Unmarshal(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzGrantRequest: any body must decode or fail cleanly, and whatever
// decodes holds only allow or deny decisions.
func FuzzGrantRequest(f *testing.F) {
	f.Add(`{"grants":{"a.b.c":"allow"}}`)
	f.Add(`{"sessionId":"s","grants":{"x":{"decision":"deny","verbs":["read","write"]}},"bundle":{"name":"n"}}`)
	f.Add(`{"grants":{"x":{"decision":"allow","constraint":{"match":[{"field":"a","op":"in","values":[1,"b",true]}]}}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req GrantRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		for id, d := range req.Grants {
			if d.Decision != DecisionAllow && d.Decision != DecisionDeny {
				t.Fatalf("grant %q decoded with decision %q", id, d.Decision)
			}
		}
	})
}

func TestVerbs(t *testing.T) {
	if !CoversVerbs([]Verb{VerbRead, VerbWrite}, []Verb{VerbWrite}) || CoversVerbs([]Verb{VerbRead}, []Verb{VerbRead, VerbWrite}) {
		t.Error("CoversVerbs")
	}
	if !CoversVerbs(nil, nil) {
		t.Error("nothing needed is covered")
	}
	got := NormalizeVerbs([]Verb{VerbExecute, VerbRead, VerbRead, "bogus"})
	if diff := cmp.Diff([]Verb{VerbRead, VerbExecute}, got); diff != "" {
		t.Errorf("NormalizeVerbs (-want +got):\n%s", diff)
	}
}

func TestSummarizeHidesDetail(t *testing.T) {
	e := Entry{ID: "a.b.c", Source: "a", Kind: KindCapability, Label: "L",
		Describe: "Read notes. Use when you need them; the rest is long.", Grants: []Verb{VerbRead}, Transport: TransportPortal,
		IO: &IOSchema{Input: json.RawMessage(`{"secretSchema":true}`)}, Route: json.RawMessage(`{"root":"/home/x"}`),
		MCP: &MCPPassthrough{Raw: json.RawMessage(`{"raw":1}`)}}
	b, _ := json.Marshal(e.Summarize())
	for _, leak := range []string{"secretSchema", "/home/x", "raw", "the rest"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("summary %s leaks %q", b, leak)
		}
	}
	if s := e.Summarize().Summary; s != "Read notes." {
		t.Errorf("summary = %q", s)
	}
	// Route never serializes, even on the full entry.
	full, _ := json.Marshal(e)
	if strings.Contains(string(full), "/home/x") {
		t.Errorf("entry JSON leaks its route: %s", full)
	}
}

func TestCodeOf(t *testing.T) {
	if CodeOf(nil) != "" || CodeOf(Errorf(CodeTokenExpired, "x")) != CodeTokenExpired {
		t.Error("CodeOf")
	}
	wrapped := WrapError(CodeNotFound, ErrNotFound, "gone")
	if CodeOf(wrapped) != CodeNotFound || AsError(json.Unmarshal([]byte("{"), new(any))).Code != CodeInternalError {
		t.Error("CodeOf/AsError")
	}
	if AsError(json.Unmarshal([]byte("{"), new(any))).Message != "internal error" {
		t.Error("an unknown error's text must not reach the wire")
	}
}
