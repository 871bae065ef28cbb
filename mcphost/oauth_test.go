package mcphost

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOAuth(t *testing.T) {
	const url = `"url":"https://api.githubcopilot.com/mcp/"`
	tests := []struct {
		name    string
		raw     string
		want    *OAuth
		ignored []string
		problem string // substring of the ConfigError's problem; "" means valid
	}{
		{name: "ClaudeCodeShape", raw: `{` + url + `,"oauth":{"clientId":"Iv1.abc","callbackPort":8976,"authServerMetadataUrl":"https://github.com/.well-known/oauth-authorization-server","scopes":"repo read:org"}}`,
			want: &OAuth{ClientID: "Iv1.abc", CallbackPort: 8976, AuthServerMetadataURL: "https://github.com/.well-known/oauth-authorization-server", Scopes: []string{"repo", "read:org"}}},
		{name: "ScopesArray", raw: `{` + url + `,"oauth":{"scopes":["a b","c"]}}`, want: &OAuth{Scopes: []string{"a", "b", "c"}}},
		{name: "Confidential", raw: `{` + url + `,"oauth":{"clientId":"c","clientSecret":"${secret:gh-oauth}"}}`,
			want: &OAuth{ClientID: "c", ClientSecret: "${secret:gh-oauth}"}},
		{name: "ClientCredentialsJWT", raw: `{` + url + `,"oauth":{"clientId":"c","privateKey":"${secret:k}","grant":"client_credentials"}}`,
			want: &OAuth{ClientID: "c", PrivateKey: "${secret:k}", Grant: GrantClientCredentials}},
		{name: "CIMD", raw: `{` + url + `,"oauth":{"clientMetadataUrl":"https://me.example/plexus.json"}}`,
			want: &OAuth{ClientMetadataURL: "https://me.example/plexus.json"}},
		{name: "LoopbackMetadata", raw: `{"url":"http://127.0.0.1:9/mcp","oauth":{"authServerMetadataUrl":"http://127.0.0.1:8/.well-known/oauth-authorization-server"}}`,
			want: &OAuth{AuthServerMetadataURL: "http://127.0.0.1:8/.well-known/oauth-authorization-server"}},
		{name: "UnknownKeysReported", raw: `{` + url + `,"oauth":{"clientId":"c","audience":"x"},"timeout":3}`,
			want: &OAuth{ClientID: "c"}, ignored: []string{"oauth.audience", "timeout"}},
		{name: "EmptyObject", raw: `{` + url + `,"oauth":{}}`, want: &OAuth{}},

		{name: "LiteralSecret", raw: `{` + url + `,"oauth":{"clientId":"c","clientSecret":"hunter2"}}`, problem: "oauth.clientSecret must name a secret, not hold a value: store it with plexus secrets set"},
		{name: "SecretInsideValue", raw: `{` + url + `,"oauth":{"privateKey":"x${secret:k}"}}`, problem: "oauth.privateKey must name a secret"},
		{name: "BadSecretName", raw: `{` + url + `,"oauth":{"clientSecret":"${secret:../k}"}}`, problem: "not a secret name"},
		{name: "StdioServer", raw: `{"command":"x","oauth":{"clientId":"c"}}`, problem: `only a "url" server`},
		{name: "HeaderAndOAuth", raw: `{` + url + `,"headers":{"authorization":"Bearer ${secret:t}"},"oauth":{}}`, problem: "keep one"},
		{name: "NotObject", raw: `{` + url + `,"oauth":"yes"}`, problem: `"oauth" must be an object`},
		{name: "PortType", raw: `{` + url + `,"oauth":{"callbackPort":"80"}}`, problem: "oauth.callbackPort must be int"},
		{name: "PortRange", raw: `{` + url + `,"oauth":{"callbackPort":70000}}`, problem: "oauth.callbackPort must be a port"},
		{name: "ScopesNumber", raw: `{` + url + `,"oauth":{"scopes":3}}`, problem: "oauth.scopes must be a string"},
		{name: "MetadataPlainHTTP", raw: `{` + url + `,"oauth":{"authServerMetadataUrl":"http://as.example/x"}}`, problem: "oauth.authServerMetadataUrl must be an https URL"},
		{name: "CIMDRoot", raw: `{` + url + `,"oauth":{"clientMetadataUrl":"https://me.example/"}}`, problem: "not the site's root"},
		{name: "CIMDHTTP", raw: `{` + url + `,"oauth":{"clientMetadataUrl":"http://127.0.0.1/c.json"}}`, problem: "oauth.clientMetadataUrl must be an https URL"},
		{name: "UnknownGrant", raw: `{` + url + `,"oauth":{"grant":"password"}}`, problem: `oauth.grant "password" is not one of`},
		{name: "ClientCredentialsNoSecret", raw: `{` + url + `,"oauth":{"clientId":"c","grant":"client_credentials"}}`, problem: "needs clientId and one of clientSecret or privateKey"},
		{name: "ClientCredentialsNoID", raw: `{` + url + `,"oauth":{"clientSecret":"${secret:s}","grant":"client_credentials"}}`, problem: "needs clientId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseServer("mcp.json", "gh", json.RawMessage(tc.raw))
			if tc.problem != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Server != "gh" || !strings.Contains(ce.Problem, tc.problem) {
					t.Fatalf("err = %v, want a ConfigError for gh containing %q", err, tc.problem)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error repeats the secret value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.OAuth); diff != "" {
				t.Errorf("oauth (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ignored, got.Ignored); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOAuthSecretNames checks that the credentials' secrets are among
// those `mcp add` and `mcp list` ask to be stored.
func TestOAuthSecretNames(t *testing.T) {
	s, err := ParseServer("mcp.json", "gh", json.RawMessage(`{"url":"https://x.example/mcp","headers":{"X":"${secret:h}"},"oauth":{"clientId":"c","clientSecret":"${secret:cs}","privateKey":"${secret:pk}"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cs", "h", "pk"}, s.SecretNames()); diff != "" {
		t.Errorf("SecretNames (-want +got):\n%s", diff)
	}
}

// TestOAuthRoundTrip writes an entry with every oauth key the way `plexus
// mcp add` does, reads the file back, and gets the same object; the
// file holds the scopes in Claude Code's shape.
func TestOAuthRoundTrip(t *testing.T) {
	o := &OAuth{ClientID: "Iv1.abc", ClientSecret: "${secret:gh-oauth}", PrivateKey: "${secret:gh-key}", CallbackPort: 8976,
		AuthServerMetadataURL: "https://github.com/.well-known/oauth-authorization-server", ClientMetadataURL: "https://me.example/plexus.json",
		Scopes: []string{"repo", "read:org"}, Grant: GrantClientCredentials}
	raw, err := EntryOf("", nil, "https://api.githubcopilot.com/mcp/", nil, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := Add(path, "github", raw, false, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"scopes": "repo read:org"`) {
		t.Errorf("mcp.json does not hold the scopes as one string:\n%s", b)
	}
	doc, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := doc.Server("github")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, s.OAuth); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

// TestBadOAuthChangesNothing: a refused entry leaves the file as it was.
func TestBadOAuthChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	orig := `{"mcpServers":{"gh":{"url":"https://x.example/mcp"}}}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := EntryOf("", nil, "https://x.example/mcp", nil, nil, &OAuth{ClientSecret: "hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseServer(path, "gh", raw); err == nil {
		t.Fatal("a literal client secret was accepted")
	}
	b, _ := os.ReadFile(path)
	if string(b) != orig {
		t.Errorf("mcp.json changed:\n%s", b)
	}
}
