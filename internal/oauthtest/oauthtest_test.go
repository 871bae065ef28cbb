package oauthtest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"net/http"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/plexus-gw/plexus/internal/oauthtest"
)

// TestSDKClientSignsIn drives the fixture with the go-sdk's own
// authorization-code client: discovery from the challenge, dynamic
// registration, PKCE, resource, iss, then a tool call with the token.
func TestSDKClientSignsIn(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://127.0.0.1:1/callback"}},
		},
		AuthorizationCodeFetcher: func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			loc, err := url.Parse(oauthtest.AuthorizeRedirect(t, args.URL))
			if err != nil {
				return nil, err
			}
			q := loc.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "scopes"})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if got, want := res.Content[0].(*mcp.TextContent).Text, "mcp:read"; got != want {
		t.Errorf("token scopes = %q, want %q", got, want)
	}
	if got := srv.Count(oauthtest.EndpointRegister); got != 1 {
		t.Errorf("registrations = %d, want 1", got)
	}
	reqs := srv.TokenRequests()
	if len(reqs) != 1 || reqs[0].Grant != "authorization_code" || reqs[0].Resource != srv.URL {
		t.Errorf("token requests = %+v, want one authorization_code for %s", reqs, srv.URL)
	}
}

func TestClientCredentialsBasic(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	srv.RegisterClient(oauthtest.Client{ID: "svc", Secret: "s3cret"})
	cfg := clientcredentials.Config{
		ClientID: "svc", ClientSecret: "s3cret", TokenURL: srv.Issuer + "/token",
		EndpointParams: url.Values{"resource": {srv.URL}},
	}
	tok, err := cfg.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok.SetAuthHeader(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		t.Errorf("MCP answered 401 to a client_credentials token")
	}
	if reqs := srv.TokenRequests(); reqs[0].AuthMethod != "client_secret_basic" {
		t.Errorf("auth method = %q, want client_secret_basic", reqs[0].AuthMethod)
	}

	cfg.ClientSecret = "wrong"
	if _, err := cfg.Token(t.Context()); err == nil {
		t.Errorf("a wrong secret got a token")
	}
}

func TestClientCredentialsPrivateKeyJWT(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterClient(oauthtest.Client{ID: "svc", PublicKey: &key.PublicKey})
	assertion := func(jti string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.RegisteredClaims{
			Issuer: "svc", Subject: "svc", Audience: jwt.ClaimStrings{srv.Issuer + "/token"},
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute)), ID: jti,
		}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(a string) int {
		resp, err := http.PostForm(srv.Issuer+"/token", url.Values{
			"grant_type": {"client_credentials"}, "resource": {srv.URL},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
			"client_assertion":      {a},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	a := assertion("one")
	if got := post(a); got != http.StatusOK {
		t.Fatalf("first assertion: status %d, want 200", got)
	}
	if got := post(a); got != http.StatusUnauthorized {
		t.Errorf("replayed assertion: status %d, want 401", got)
	}
	if reqs := srv.TokenRequests(); len(reqs) != 1 || reqs[0].AuthMethod != "private_key_jwt" {
		t.Errorf("token requests = %+v, want one private_key_jwt", reqs)
	}
}
