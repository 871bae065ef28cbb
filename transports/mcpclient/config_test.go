package mcpclient_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/transports/mcpclient"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"github": true, "my-server_2": true, "0x": true, strings.Repeat("a", 60): true,
		"": false, "GitHub": false, "a.b": false, "a:b": false, "-a": false, "a b": false, strings.Repeat("a", 61): false,
	} {
		if got := mcpclient.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   mcpclient.ServerConfig
		field string // "" when valid
	}{
		{"Command", mcpclient.ServerConfig{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"TOKEN": "x"}}, ""},
		{"AbsoluteCommand", mcpclient.ServerConfig{Command: "/usr/bin/srv"}, ""},
		{"HTTPS", mcpclient.ServerConfig{URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}, ""},
		{"HTTPLoopback", mcpclient.ServerConfig{URL: "http://127.0.0.1:3001/mcp"}, ""},
		{"HTTPLocalhost", mcpclient.ServerConfig{URL: "http://localhost:3001/mcp"}, ""},
		{"Neither", mcpclient.ServerConfig{}, "command"},
		{"Both", mcpclient.ServerConfig{Command: "srv", URL: "https://x"}, "url"},
		{"RelativePath", mcpclient.ServerConfig{Command: "./srv"}, "command"},
		{"Spaces", mcpclient.ServerConfig{Command: " srv"}, "command"},
		{"BadEnvName", mcpclient.ServerConfig{Command: "srv", Env: map[string]string{"1X": "v"}}, "env.1X"},
		{"PlexusEnv", mcpclient.ServerConfig{Command: "srv", Env: map[string]string{"PLEXUS_HOME": "v"}}, "env.PLEXUS_HOME"},
		{"NULInEnv", mcpclient.ServerConfig{Command: "srv", Env: map[string]string{"X": "a\x00b"}}, "env.X"},
		{"HeadersOnCommand", mcpclient.ServerConfig{Command: "srv", Headers: map[string]string{"A": "b"}}, "headers"},
		{"ArgsOnURL", mcpclient.ServerConfig{URL: "https://x", Args: []string{"a"}}, "url"},
		{"Scheme", mcpclient.ServerConfig{URL: "ftp://x"}, "url"},
		{"NoHost", mcpclient.ServerConfig{URL: "https:///mcp"}, "url"},
		{"Userinfo", mcpclient.ServerConfig{URL: "https://u:p@x/mcp"}, "url"},
		{"PlainHTTPRemote", mcpclient.ServerConfig{URL: "http://mcp.example.com/mcp"}, "url"},
		{"BadHeaderName", mcpclient.ServerConfig{URL: "https://x", Headers: map[string]string{"A B": "v"}}, "headers.A B"},
		{"SDKHeader", mcpclient.ServerConfig{URL: "https://x", Headers: map[string]string{"mcp-session-id": "v"}}, "headers.mcp-session-id"},
		{"CRLFInHeader", mcpclient.ServerConfig{URL: "https://x", Headers: map[string]string{"X-Key": "a\r\nb"}}, "headers.X-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ce *mcpclient.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ce.Field, tt.field, err)
			}
		})
	}
	t.Run("SecretsNotInErrors", func(t *testing.T) {
		err := mcpclient.ServerConfig{URL: "https://x", Headers: map[string]string{"X-Key": "s3cret\n"}}.Validate()
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("New", func(t *testing.T) {
		_, err := mcpclient.New("Bad.Name", mcpclient.ServerConfig{Command: "srv"}, mcpclient.Options{})
		var ce *mcpclient.ConfigError
		if !errors.As(err, &ce) || ce.Field != "name" {
			t.Errorf("got %v, want a name error", err)
		}
		_, err = mcpclient.New("ok", mcpclient.ServerConfig{}, mcpclient.Options{})
		if !errors.As(err, &ce) || ce.Server != "ok" || !strings.HasPrefix(err.Error(), `mcp server "ok": command:`) {
			t.Errorf("got %v, want an error naming the server and field", err)
		}
	})
}
