// Package hosts edits the configuration files of MCP hosts (Claude Code,
// Claude Desktop, Cursor, VS Code, Codex, Gemini CLI, Windsurf): it locates
// a host's file, lists the servers it configures, and adds, replaces or
// removes the one entry named "plexus", printing a diff and keeping a
// backup. It holds the flows of `plexus clients` (Connect, Disconnect,
// Statuses); the gateway and the stored credentials reach it only through
// the small [Enroller] and [Agents] its caller hands in.
//
// The files are the owner's and the hosts': an edit changes only the bytes
// of that one entry. Every other entry, comment, key order, indentation and
// trailing comma stays byte for byte, and a file that does not parse, is
// not a regular file, or changed on disk since it was read is never
// written. It must never follow a link out of the place the owner named,
// never read past a bound, and never run anything a file describes.
package hosts

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Format is the shape of a host's file.
type Format string

const (
	// FormatMCPServers is JSON with servers under "mcpServers" (Claude
	// Code, Claude Desktop, Cursor, Gemini CLI, Windsurf).
	FormatMCPServers Format = "mcpServers"
	// FormatVSCode is JSONC (comments, trailing commas) with servers under
	// "servers".
	FormatVSCode Format = "vscode"
	// FormatCodexTOML is TOML with one [mcp_servers.<name>] table a server.
	FormatCodexTOML Format = "codex-toml"
)

// Formats lists the formats a custom --config may name.
func Formats() []Format { return []Format{FormatMCPServers, FormatVSCode, FormatCodexTOML} }

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	f := Format(s)
	if !slices.Contains(Formats(), f) {
		return "", fmt.Errorf("unknown format %q: one of mcpServers, vscode, codex-toml", s)
	}
	return f, nil
}

// Scope says which of a host's files, or which part of one: the user's,
// the project's, or (Claude Code's "local") the user's file's section for
// one project.
type Scope string

const (
	ScopeUser    Scope = "user"
	ScopeProject Scope = "project"
	// ScopeLocal is Claude Code's default scope: servers private to one
	// project, kept in ~/.claude.json under projects["<absolute project
	// path>"].mcpServers.
	ScopeLocal Scope = "local"
)

// EntryName is the name of the entry Plexus owns in a host's file.
const EntryName = "plexus"

// Env is what locating a host's file reads from the environment, handed
// in by the caller (only the command line reads the environment).
type Env struct {
	GOOS          string // runtime.GOOS
	Home          string // $HOME (%USERPROFILE% on Windows)
	AppData       string // %APPDATA%, on Windows only
	XDGConfigHome string // $XDG_CONFIG_HOME, "" when unset
	CodexHome     string // $CODEX_HOME, "" when unset
	ProjectDir    string // the project's root, for ScopeProject
}

// configHome is $XDG_CONFIG_HOME, or ~/.config when it is unset or not
// absolute (as the XDG spec says to treat a relative one).
func (e Env) configHome() string {
	if filepath.IsAbs(e.XDGConfigHome) {
		return e.XDGConfigHome
	}
	return filepath.Join(e.Home, ".config")
}

// appSupport is where a desktop application keeps its settings: macOS's
// Application Support, Windows's %APPDATA%, or the XDG config home
// elsewhere.
func (e Env) appSupport() string {
	switch e.GOOS {
	case "darwin":
		return filepath.Join(e.Home, "Library", "Application Support")
	case "windows":
		return e.AppData
	}
	return e.configHome()
}

// join joins a path's elements with the separator of e's system, so that
// Windows paths come out right whatever system computes them (a test on
// Linux, with a fake env).
func (e Env) join(elem ...string) string {
	if e.GOOS != "windows" {
		return filepath.Join(elem...)
	}
	var parts []string
	for i, p := range elem {
		p = strings.ReplaceAll(p, "/", `\`)
		if i > 0 {
			p = strings.Trim(p, `\`)
		} else {
			p = strings.TrimRight(p, `\`)
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, `\`)
}

// isAbs reports whether p is absolute on e's system: on Windows a drive's
// root (C:\…) or a UNC share (\\server\…).
func (e Env) isAbs(p string) bool {
	if e.GOOS != "windows" {
		return filepath.IsAbs(p)
	}
	if strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// Host is one MCP host: where its files are and how it writes an entry.
type Host struct {
	Name   string // claude-code, cursor, …
	Label  string // for people: "Claude Code"
	Format Format
	// StdioType and HTTPType are the "type" the host wants in a stdio or
	// an HTTP entry; "" writes none.
	StdioType, HTTPType string
	// URLKey names an HTTP entry's URL ("url", Gemini's "httpUrl",
	// Windsurf's "serverUrl"); "" when the host's file cannot hold an HTTP
	// server (Claude Desktop adds remote servers in its UI only).
	URLKey string
	// HeadersKey names an HTTP entry's headers ("headers", Codex's
	// "http_headers").
	HeadersKey string
	// Project is the project file relative to the project's root; "" when
	// the host has none.
	Project string
	// Local says the user's file also keeps servers per project, under
	// projects["<absolute project path>"].mcpServers (Claude Code's local
	// scope).
	Local bool
	// project is the project whose local-scope servers this Host edits,
	// "" for the file's own servers; set by [Host.Locate].
	project string
	// user locates the user's file; nil for a custom host.
	user func(Env) string
	// path is a custom host's one file.
	path string
}

// Known returns the hosts Plexus knows, in a stable order. Locations follow
// each host's documentation on Linux, macOS and Windows.
func Known() []Host {
	return []Host{
		{Name: "claude-code", Label: "Claude Code", Format: FormatMCPServers, StdioType: "stdio", HTTPType: "http",
			URLKey: "url", HeadersKey: "headers", Project: ".mcp.json", Local: true,
			user: func(e Env) string { return e.join(e.Home, ".claude.json") }},
		{Name: "claude-desktop", Label: "Claude Desktop", Format: FormatMCPServers,
			user: func(e Env) string { return e.join(e.appSupport(), "Claude", "claude_desktop_config.json") }},
		{Name: "cursor", Label: "Cursor", Format: FormatMCPServers, URLKey: "url", HeadersKey: "headers",
			Project: filepath.Join(".cursor", "mcp.json"),
			user:    func(e Env) string { return e.join(e.Home, ".cursor", "mcp.json") }},
		{Name: "vscode", Label: "VS Code", Format: FormatVSCode, StdioType: "stdio", HTTPType: "http",
			URLKey: "url", HeadersKey: "headers", Project: filepath.Join(".vscode", "mcp.json"),
			user: func(e Env) string { return e.join(e.appSupport(), "Code", "User", "mcp.json") }},
		// Insiders reads the workspace's .vscode/mcp.json too: that file is
		// VS Code's here, so that it is connected and listed once.
		{Name: "vscode-insiders", Label: "VS Code Insiders", Format: FormatVSCode, StdioType: "stdio", HTTPType: "http",
			URLKey: "url", HeadersKey: "headers",
			user: func(e Env) string { return e.join(e.appSupport(), "Code - Insiders", "User", "mcp.json") }},
		{Name: "codex", Label: "Codex", Format: FormatCodexTOML, URLKey: "url", HeadersKey: "http_headers",
			Project: filepath.Join(".codex", "config.toml"),
			user: func(e Env) string {
				if e.isAbs(e.CodexHome) {
					return e.join(e.CodexHome, "config.toml")
				}
				return e.join(e.Home, ".codex", "config.toml")
			}},
		{Name: "gemini", Label: "Gemini CLI", Format: FormatMCPServers, URLKey: "httpUrl", HeadersKey: "headers",
			Project: filepath.Join(".gemini", "settings.json"),
			user:    func(e Env) string { return e.join(e.Home, ".gemini", "settings.json") }},
		{Name: "windsurf", Label: "Windsurf", Format: FormatMCPServers, URLKey: "serverUrl", HeadersKey: "headers",
			user: func(e Env) string { return e.join(e.Home, ".codeium", "windsurf", "mcp_config.json") }},
	}
}

// Names lists the known hosts' names.
func Names() []string {
	var out []string
	for _, h := range Known() {
		out = append(out, h.Name)
	}
	return out
}

// Lookup returns the known host named name.
func Lookup(name string) (Host, error) {
	for _, h := range Known() {
		if h.Name == name {
			return h, nil
		}
	}
	return Host{}, fmt.Errorf("unknown host %q: one of %s (or --config PATH --format FORMAT)", name, strings.Join(Names(), ", "))
}

// Custom is a host Plexus does not know, named name, whose file is path in
// format f: entries are written in the format's plainest shape.
func Custom(name, path string, f Format) Host {
	h := Host{Name: name, Label: name, Format: f, URLKey: "url", HeadersKey: "headers", path: path}
	switch f {
	case FormatVSCode:
		h.StdioType, h.HTTPType = "stdio", "http"
	case FormatCodexTOML:
		h.HeadersKey = "http_headers"
	}
	return h
}

// Path is the file of h in scope. A project scope the host does not have,
// or an operating system whose locations Plexus does not know, is an
// error.
func (h Host) Path(e Env, s Scope) (string, error) {
	if h.path != "" {
		return h.path, nil
	}
	if e.GOOS != "linux" && e.GOOS != "darwin" && e.GOOS != "windows" {
		return "", fmt.Errorf("%s: Plexus knows its files on Linux, macOS and Windows only; pass --config PATH --format FORMAT", h.Label)
	}
	if s == ScopeLocal && !h.Local {
		return "", fmt.Errorf("%s has no local scope: its scopes are %s", h.Label, strings.Join(h.Scopes(), ", "))
	}
	switch s {
	case ScopeUser, ScopeLocal, "":
		if !e.isAbs(e.Home) {
			return "", fmt.Errorf("%s: no home directory ($HOME is %q)", h.Label, e.Home)
		}
		p := h.user(e)
		if !e.isAbs(p) {
			return "", fmt.Errorf("%s: its file is under %%APPDATA%%, which is %q", h.Label, e.AppData)
		}
		return p, nil
	case ScopeProject:
		if h.Project == "" {
			return "", fmt.Errorf("%s has no project file; use --scope user", h.Label)
		}
		if !e.isAbs(e.ProjectDir) {
			return "", fmt.Errorf("%s: the project directory %q is not absolute", h.Label, e.ProjectDir)
		}
		return e.join(e.ProjectDir, h.Project), nil
	}
	return "", fmt.Errorf("unknown scope %q: %s has %s", s, h.Label, strings.Join(h.Scopes(), ", "))
}

// Scopes names the scopes h has, for messages.
func (h Host) Scopes() []string {
	out := []string{string(ScopeUser)}
	if h.Project != "" {
		out = append(out, string(ScopeProject))
	}
	if h.Local {
		out = append(out, string(ScopeLocal))
	}
	return out
}

// Locate is [Host.Path], and h set to edit the servers of scope s in
// that file: with ScopeLocal, those of the project e.ProjectDir (which
// must be absolute) in the user's file.
func (h Host) Locate(e Env, s Scope) (Host, string, error) {
	path, err := h.Path(e, s)
	if err != nil || s != ScopeLocal {
		return h, path, err
	}
	if e.GOOS == "windows" {
		// How Claude Code spells a Windows project's key (separators,
		// drive letter case) is not documented: no guess is written.
		return h, "", fmt.Errorf("%s: Plexus does not know how Claude Code names a project on Windows; use --scope user or project", h.Label)
	}
	if !filepath.IsAbs(e.ProjectDir) {
		return h, "", fmt.Errorf("%s: the project directory %q is not absolute", h.Label, e.ProjectDir)
	}
	h.project = filepath.Clean(e.ProjectDir)
	return h, path, nil
}

// LocalProject is the project whose local-scope servers h edits, "" when h
// edits its file's own servers.
func (h Host) LocalProject() string { return h.project }

// container is the keys leading to the object of servers in h's file.
func (h Host) container() []string {
	switch {
	case h.Format == FormatVSCode:
		return []string{"servers"}
	case h.project != "":
		return []string{"projects", h.project, "mcpServers"}
	}
	return []string{"mcpServers"}
}

// ForFile is the host named name whose file is path, in format f: a known
// host of that format keeps its own entry shape there; any other is
// [Custom].
func ForFile(name, path string, f Format) Host {
	if known, err := Lookup(name); err == nil && known.Format == f {
		return known
	}
	return Custom(name, path, f)
}
