package hosts

import (
	"testing"
)

func TestPath(t *testing.T) {
	linux := Env{GOOS: "linux", Home: "/home/o", ProjectDir: "/src/app"}
	mac := Env{GOOS: "darwin", Home: "/Users/o", ProjectDir: "/src/app"}
	xdg := linux
	xdg.XDGConfigHome = "/xdg"
	relXDG := linux
	relXDG.XDGConfigHome = "rel"
	codexHome := linux
	codexHome.CodexHome = "/opt/codex"
	tests := []struct {
		host  string
		env   Env
		scope Scope
		want  string
	}{
		{"claude-code", linux, ScopeUser, "/home/o/.claude.json"},
		{"claude-code", mac, ScopeUser, "/Users/o/.claude.json"},
		{"claude-code", linux, ScopeProject, "/src/app/.mcp.json"},
		{"claude-desktop", linux, ScopeUser, "/home/o/.config/Claude/claude_desktop_config.json"},
		{"claude-desktop", xdg, ScopeUser, "/xdg/Claude/claude_desktop_config.json"},
		{"claude-desktop", relXDG, ScopeUser, "/home/o/.config/Claude/claude_desktop_config.json"},
		{"claude-desktop", mac, ScopeUser, "/Users/o/Library/Application Support/Claude/claude_desktop_config.json"},
		{"cursor", linux, ScopeUser, "/home/o/.cursor/mcp.json"},
		{"cursor", mac, ScopeProject, "/src/app/.cursor/mcp.json"},
		{"vscode", linux, ScopeUser, "/home/o/.config/Code/User/mcp.json"},
		{"vscode", xdg, ScopeUser, "/xdg/Code/User/mcp.json"},
		{"vscode", mac, ScopeUser, "/Users/o/Library/Application Support/Code/User/mcp.json"},
		{"vscode", linux, ScopeProject, "/src/app/.vscode/mcp.json"},
		{"vscode-insiders", linux, ScopeUser, "/home/o/.config/Code - Insiders/User/mcp.json"},
		{"vscode-insiders", mac, ScopeUser, "/Users/o/Library/Application Support/Code - Insiders/User/mcp.json"},
		{"codex", linux, ScopeUser, "/home/o/.codex/config.toml"},
		{"codex", codexHome, ScopeUser, "/opt/codex/config.toml"},
		{"codex", mac, ScopeUser, "/Users/o/.codex/config.toml"},
		{"codex", linux, ScopeProject, "/src/app/.codex/config.toml"},
		{"gemini", linux, ScopeUser, "/home/o/.gemini/settings.json"},
		{"gemini", mac, ScopeProject, "/src/app/.gemini/settings.json"},
		{"windsurf", linux, ScopeUser, "/home/o/.codeium/windsurf/mcp_config.json"},
		{"windsurf", mac, ScopeUser, "/Users/o/.codeium/windsurf/mcp_config.json"},
	}
	for _, tt := range tests {
		t.Run(tt.host+"/"+tt.env.GOOS+"/"+string(tt.scope), func(t *testing.T) {
			got, err := mustLookup(t, tt.host).Path(tt.env, tt.scope)
			if err != nil || got != tt.want {
				t.Errorf("Path = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPathErrors(t *testing.T) {
	tests := []struct {
		name  string
		host  string
		env   Env
		scope Scope
	}{
		{"NoProjectFile", "windsurf", Env{GOOS: "linux", Home: "/h", ProjectDir: "/p"}, ScopeProject},
		{"NoProjectFileDesktop", "claude-desktop", Env{GOOS: "darwin", Home: "/h", ProjectDir: "/p"}, ScopeProject},
		{"Windows", "cursor", Env{GOOS: "windows", Home: `C:\Users\o`}, ScopeUser},
		{"NoHome", "cursor", Env{GOOS: "linux"}, ScopeUser},
		{"RelativeProject", "cursor", Env{GOOS: "linux", Home: "/h", ProjectDir: "app"}, ScopeProject},
		{"BadScope", "cursor", Env{GOOS: "linux", Home: "/h"}, "global"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := mustLookup(t, tt.host).Path(tt.env, tt.scope); err == nil {
				t.Errorf("Path = %q, want an error", got)
			}
		})
	}
}

func TestCustom(t *testing.T) {
	for _, f := range Formats() {
		h := Custom("myhost", "/etc/x", f)
		if p, err := h.Path(Env{GOOS: "windows"}, ScopeProject); err != nil || p != "/etc/x" {
			t.Errorf("%s: Path = %q, %v", f, p, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil {
		t.Error("ParseFormat(yaml) = nil error")
	}
	if _, err := Lookup("notepad"); err == nil {
		t.Error("Lookup(notepad) = nil error")
	}
}
