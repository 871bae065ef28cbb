package hosts

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The secrets other servers keep in a host's file, in each format.
const (
	secretEnv    = "ghp_neighbourToken123"
	secretHeader = "sk-live-neighbourKey456"
	secretUser   = "hunter2pass"
	secretQuery  = "qkey789"
	secretCodex  = "codexEnvHeaderVar"
)

func TestDiffRedactsNeighbours(t *testing.T) {
	jsonFile := `{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_TOKEN": "` + secretEnv + `"}
    },
    "remote": {
      "url": "https://bot:` + secretUser + `@api.example.com/mcp?api_key=` + secretQuery + `",
      "headers": {
        "Authorization": "Bearer ` + secretHeader + `"
      }
    }
  }
}
`
	jsoncFile := `{
  // the team's servers
  "servers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "env": {
        /* from the vault */
        "GITHUB_TOKEN": "` + secretEnv + `",
      },
    },
    "remote": {
      "type": "http",
      "url": "https://bot:` + secretUser + `@api.example.com/mcp?api_key=` + secretQuery + `",
      "headers": {"Authorization": "Bearer ` + secretHeader + `"},
    },
  },
}
`
	tomlFile := `model = "o3"

[mcp_servers.github]
command = "npx"
env = { "GITHUB_TOKEN" = "` + secretEnv + `" }

[mcp_servers.remote]
url = "https://bot:` + secretUser + `@api.example.com/mcp?api_key=` + secretQuery + `"
bearer_token_env_var = "` + secretCodex + `"
http_headers = { Authorization = "Bearer ` + secretHeader + `" }

[mcp_servers.remote.env_http_headers]
X-Key = """` + secretCodex + `
"""

[mcp_servers.shell]
command = "bash"

[mcp_servers.shell.env]
API_KEY = '` + secretEnv + `'
`
	files := []struct{ name, host, file, content string }{
		{"JSON", "cursor", "mcp.json", jsonFile},
		{"JSONC", "vscode", "mcp.json", jsoncFile},
		{"TOML", "codex", "config.toml", tomlFile},
	}
	plans := []struct {
		name string
		plan func(*Config) (*Edit, error)
	}{
		{"ReplaceAll", func(c *Config) (*Edit, error) { return c.ReplaceAll(remote) }},
		{"Upsert", func(c *Config) (*Edit, error) { return c.Upsert(stdio) }},
		{"Remove", func(c *Config) (*Edit, error) { return c.Remove() }},
	}
	for _, f := range files {
		for _, p := range plans {
			t.Run(f.name+"/"+p.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), f.file)
				content := f.content
				if p.name == "Remove" {
					// A file holding a plexus entry to remove, after the others.
					cfg := mustRead(t, mustLookup(t, f.host), writeFile(t, path, content))
					ed, err := cfg.Upsert(remote)
					if err != nil {
						t.Fatal(err)
					}
					content = string(ed.New)
				}
				cfg := mustRead(t, mustLookup(t, f.host), writeFile(t, path, content))
				ed, err := p.plan(cfg)
				if err != nil {
					t.Fatal(err)
				}
				diff := ed.Diff()
				if os.Getenv("FX2_SHOW") != "" {
					t.Log(diff)
				}
				for _, sec := range []string{secretEnv, secretHeader, secretUser, secretQuery, secretCodex, "plx_agent_example"} {
					if strings.Contains(diff, sec) {
						t.Errorf("diff shows %q:\n%s", sec, diff)
					}
				}
				for _, want := range []string{"github", "remote", "GITHUB_TOKEN", "<redacted>"} {
					if strings.Contains(content, want) && !strings.Contains(diff, want) && p.name == "ReplaceAll" {
						t.Errorf("diff lacks %q:\n%s", want, diff)
					}
				}
				if !strings.Contains(diff, "plexus") {
					t.Errorf("diff does not name the plexus entry:\n%s", diff)
				}
			})
		}
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRedactText(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		in     string
		want   string
	}{
		{"JSONEnv", FormatMCPServers, `{"a": {"env": {"K": "v"}, "command": "c"}}`, `{"a": {"env": {"K": "<redacted>"}, "command": "c"}}`},
		{"JSONBearerKeepsScheme", FormatMCPServers, `{"headers": {"Authorization": "Bearer x"}}`, `{"headers": {"Authorization": "Bearer <redacted>"}}`},
		{"JSONServerNamedEnv", FormatMCPServers, `{"mcpServers": {"env": {"command": "c"}}}`, `{"mcpServers": {"env": {"command": "c"}}}`},
		{"JSONURLQuery", FormatMCPServers, `{"url": "https://h/p?k=v#f"}`, `{"url": "https://h/p?<redacted>#f"}`},
		{"JSONURLUserinfo", FormatMCPServers, `{"url": "https://u:p@h/p"}`, `{"url": "https://<redacted>@h/p"}`},
		{"JSONCComment", FormatVSCode, "{\"env\": {\n// \"K\": \"x\"\n\"K\": \"v\",}}", "{\"env\": {\n// \"K\": \"x\"\n\"K\": \"<redacted>\",}}"},
		{"TOMLTable", FormatCodexTOML, "[mcp_servers.a.env]\nK = \"v\"\n[mcp_servers.a]\ncommand = \"c\"\n", "[mcp_servers.a.env]\nK = \"<redacted>\"\n[mcp_servers.a]\ncommand = \"c\"\n"},
		{"TOMLInlineKeepsKeys", FormatCodexTOML, "[mcp_servers.a]\nhttp_headers = { \"X-K\" = \"v\", Y = 'w' }\n", "[mcp_servers.a]\nhttp_headers = { \"X-K\" = \"<redacted>\", Y = \"<redacted>\" }\n"},
		{"TOMLDotted", FormatCodexTOML, "[mcp_servers.a]\nenv.K = \"v\"\n", "[mcp_servers.a]\nenv.K = \"<redacted>\"\n"},
		{"TOMLServerNamedEnv", FormatCodexTOML, "[mcp_servers.env]\ncommand = \"c\"\n", "[mcp_servers.env]\ncommand = \"c\"\n"},
		{"TOMLMultiline", FormatCodexTOML, "[mcp_servers.a.env]\nK = \"\"\"\nsecret\n\"\"\"\nL = 1\n", "[mcp_servers.a.env]\nK = \"\"\"<redacted>\n<redacted>\n\"\"\"\nL = 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactText(tt.format, tt.in); got != tt.want {
				t.Errorf("redactText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestConnectHTTPTightensMode(t *testing.T) {
	path, _ := copyTestdata(t, "cursor.json") // 0644
	c := connection(t, path, "plx_agent_stored")
	c.Reach = Reach{HTTP: true, Addr: "127.0.0.1:7077"}
	var out bytes.Buffer
	if err := Connect(context.Background(), &out, c, (*Config).Upsert); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode = %04o; want 0600", got)
	}
	if want := "mode 0600 (it was 0644)"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
