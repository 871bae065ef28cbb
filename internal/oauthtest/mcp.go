package oauthtest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// EchoArgs is the input of the fixture's "echo" tool.
type EchoArgs struct {
	Text string `json:"text"`
}

func (s *Server) mcpHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "v0.0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "scopes", Description: "says which scopes the caller's token carries"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			var scopes []string
			if ti := req.Extra.TokenInfo; ti != nil {
				scopes = ti.Scopes
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(scopes, " ")}}}, nil, nil
		})
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	protected := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.prmURL(),
	})(streamable)

	mux := http.NewServeMux()
	prm := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(EndpointPRM)
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               s.URL,
			AuthorizationServers:   []string{s.Issuer},
			ScopesSupported:        s.opts.ScopesSupported,
			BearerMethodsSupported: []string{"header"},
		}).ServeHTTP(w, r)
	})
	mux.Handle("/.well-known/oauth-protected-resource/mcp", prm)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(EndpointMCP)
		if s.challenge(w, r) {
			return
		}
		protected.ServeHTTP(w, r)
	}))
	return mux
}

// prmURL is the protected resource metadata's URL (RFC 9728 §3.1: the
// well-known prefix inserted before the resource's path).
func (s *Server) prmURL() string {
	return strings.TrimSuffix(s.URL, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
}

// challenge answers a request that has no usable token for the scopes now
// required: 401 with the challenge (no token, unknown or expired token) or
// 403 insufficient_scope (step-up). It reports whether it answered.
func (s *Server) challenge(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	required := slices.Clone(s.required)
	s.mu.Unlock()
	params := []string{}
	if !s.opts.NoChallengeMetadata {
		params = append(params, fmt.Sprintf("resource_metadata=%q", s.prmURL()))
	}
	if !s.opts.NoChallengeScope {
		params = append(params, fmt.Sprintf("scope=%q", strings.Join(required, " ")))
	}
	fields := strings.Fields(r.Header.Get("Authorization"))
	var ti *auth.TokenInfo
	if len(fields) == 2 && strings.EqualFold(fields[0], "bearer") {
		if got, err := s.lookup(fields[1]); err == nil {
			ti = got // an unknown or expired token leaves ti nil: answered 401 below
		}
	}
	if ti == nil {
		w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return true
	}
	for _, sc := range required {
		if !slices.Contains(ti.Scopes, sc) {
			params = append([]string{`error="insufficient_scope"`}, params...)
			w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return true
		}
	}
	return false
}

// verify is the resource server's token check: a token this server issued,
// for this resource (its audience), not expired.
func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	return s.lookup(token)
}

func (s *Server) lookup(token string) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.access[token]
	if s.rejectTokens || g == nil || g.resource != s.URL || time.Now().After(g.expires) {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Scopes: slices.Clone(g.scopes), Expiration: g.expires, UserID: g.clientID}, nil
}
