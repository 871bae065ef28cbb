package oauth

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

func TestPRMCandidates(t *testing.T) {
	challenge := []oauthex.Challenge{{Scheme: "bearer", Params: map[string]string{"resource_metadata": "https://mcp.example/meta"}}}
	for _, tc := range []struct {
		name, server string
		ch           []oauthex.Challenge
		want         []prmCandidate
	}{
		{"Challenge", "https://mcp.example/v1/mcp", challenge, []prmCandidate{
			{"https://mcp.example/meta", "https://mcp.example/v1/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource/v1/mcp", "https://mcp.example/v1/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
		{"WellKnown", "https://mcp.example/mcp", nil, []prmCandidate{
			{"https://mcp.example/.well-known/oauth-protected-resource/mcp", "https://mcp.example/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
		{"Root", "https://mcp.example", nil, []prmCandidate{
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prmCandidates(tc.server, tc.ch)
			if !cmp.Equal(got, tc.want, cmp.AllowUnexported(prmCandidate{})) {
				t.Errorf("prmCandidates = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScopeSets(t *testing.T) {
	a, b := []string{"read", "offline_access"}, []string{"read", "write"}
	if got, want := union(a, b), []string{"read", "offline_access", "write"}; !cmp.Equal(got, want) {
		t.Errorf("union = %v, want %v", got, want)
	}
	if got, want := minus(b, a), []string{"write"}; !cmp.Equal(got, want) {
		t.Errorf("minus = %v, want %v", got, want)
	}
	if got := minus(a, a); got != nil {
		t.Errorf("minus of a set by itself = %v, want nil", got)
	}
}

func TestSafeCode(t *testing.T) {
	for in, want := range map[string]string{
		"invalid_grant":          "invalid_grant",
		"":                       "",
		"bad code <b>":           "",
		"at-123.x":               "at-123.x",
		string(make([]byte, 65)): "",
	} {
		if got := safeCode(in); got != want {
			t.Errorf("safeCode(%q) = %q, want %q", in, got, want)
		}
	}
}
