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

// TestPathWindows: on Windows each host's file is where its documentation
// puts it, under %USERPROFILE% or %APPDATA%, with Windows separators,
// whatever system computes it.
func TestPathWindows(t *testing.T) {
	win := Env{GOOS: "windows", Home: `C:\Users\o`, AppData: `C:\Users\o\AppData\Roaming`, ProjectDir: `D:\src\app\`}
	codexHome := win
	codexHome.CodexHome = `E:\codex`
	unc := win
	unc.Home = `\\server\home\o`
	tests := []struct {
		host  string
		env   Env
		scope Scope
		want  string
	}{
		{"claude-code", win, ScopeUser, `C:\Users\o\.claude.json`},
		{"claude-code", win, ScopeProject, `D:\src\app\.mcp.json`},
		{"claude-desktop", win, ScopeUser, `C:\Users\o\AppData\Roaming\Claude\claude_desktop_config.json`},
		{"cursor", win, ScopeUser, `C:\Users\o\.cursor\mcp.json`},
		{"cursor", win, ScopeProject, `D:\src\app\.cursor\mcp.json`},
		{"cursor", unc, ScopeUser, `\\server\home\o\.cursor\mcp.json`},
		{"vscode", win, ScopeUser, `C:\Users\o\AppData\Roaming\Code\User\mcp.json`},
		{"vscode", win, ScopeProject, `D:\src\app\.vscode\mcp.json`},
		{"vscode-insiders", win, ScopeUser, `C:\Users\o\AppData\Roaming\Code - Insiders\User\mcp.json`},
		{"codex", win, ScopeUser, `C:\Users\o\.codex\config.toml`},
		{"codex", codexHome, ScopeUser, `E:\codex\config.toml`},
		{"codex", win, ScopeProject, `D:\src\app\.codex\config.toml`},
		{"gemini", win, ScopeUser, `C:\Users\o\.gemini\settings.json`},
		{"windsurf", win, ScopeUser, `C:\Users\o\.codeium\windsurf\mcp_config.json`},
	}
	for _, tt := range tests {
		t.Run(tt.host+"/"+string(tt.scope), func(t *testing.T) {
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
		{"OtherOS", "cursor", Env{GOOS: "plan9", Home: "/usr/o"}, ScopeUser},
		{"WindowsNoAppData", "vscode", Env{GOOS: "windows", Home: `C:\Users\o`}, ScopeUser},
		{"WindowsRelativeAppData", "claude-desktop", Env{GOOS: "windows", Home: `C:\Users\o`, AppData: `AppData\Roaming`}, ScopeUser},
		{"WindowsHomeNotADrive", "cursor", Env{GOOS: "windows", Home: `/home/o`}, ScopeUser},
		{"WindowsRelativeProject", "cursor", Env{GOOS: "windows", Home: `C:\Users\o`, ProjectDir: `src\app`}, ScopeProject},
		{"WindowsLocal", "claude-code", Env{GOOS: "windows", Home: `C:\Users\o`, ProjectDir: `D:\src\app`}, ScopeLocal},
		{"NoHome", "cursor", Env{GOOS: "linux"}, ScopeUser},
		{"RelativeProject", "cursor", Env{GOOS: "linux", Home: "/h", ProjectDir: "app"}, ScopeProject},
		{"BadScope", "cursor", Env{GOOS: "linux", Home: "/h"}, "global"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got, err := mustLookup(t, tt.host).Locate(tt.env, tt.scope); err == nil {
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
