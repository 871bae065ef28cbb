package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/hosts"
)

// hostHome points $HOME (and the XDG and Codex homes) at a temporary
// folder, so that the hosts' files the commands find are the test's.
func hostHome(t *testing.T) hosts.Env {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CODEX_HOME", "")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return hosts.Env{GOOS: runtime.GOOS, Home: home, ProjectDir: wd}
}

// plantHostFile writes hosts/testdata/<file> where host keeps its user
// file, and returns the path and the bytes.
func plantHostFile(t *testing.T, env hosts.Env, host, file string) (string, []byte) {
	t.Helper()
	h, err := hosts.Lookup(host)
	if err != nil {
		t.Fatal(err)
	}
	path, err := h.Path(env, hosts.ScopeUser)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "hosts", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agentIDs lists the daemon's agents' ids.
func (e *cliEnv) agentIDs() []string {
	e.t.Helper()
	var agents []plexus.Agent
	e.jsonOut(&agents, "agents", "list", "--json")
	var ids []string
	for _, a := range agents {
		if a.RevokedAt == nil {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// listedHost is a row of `clients list --json`, decoded as a user of the
// command would (not the command's own type, so the test moves freely).
type listedHost struct {
	Host      string     `json:"host"`
	Scope     string     `json:"scope"`
	Config    string     `json:"config"`
	Installed bool       `json:"installed"`
	Connected bool       `json:"connected"`
	Transport string     `json:"transport"`
	Agent     string     `json:"agent"`
	Enrolled  bool       `json:"enrolled"`
	LastCall  *time.Time `json:"lastCall"`
}

var testHostFiles = []struct{ host, file string }{
	{"claude-code", "claude-code.json"},
	{"claude-desktop", "claude-desktop.json"},
	{"cursor", "cursor.json"},
	{"vscode", "vscode.jsonc"},
	{"codex", "codex.toml"},
	{"gemini", "gemini.json"},
	{"windsurf", "windsurf.json"},
}

// TestClientsConnect: for every host, against a real daemon: --dry-run
// prints the diff and changes nothing; connect enrolls the host's agent,
// stores its credential under --home, writes an entry launching this
// binary, keeps a backup; connecting again is a no-op without a second
// agent; list shows it; disconnect gives the file back byte for byte.
func TestClientsConnect(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	// The entry launches the binary the command ran as, links resolved.
	exe, err := filepath.EvalSymlinks(plexusBin(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, hf := range testHostFiles {
		t.Run(hf.host, func(t *testing.T) {
			e := e.with(t)
			path, orig := plantHostFile(t, env, hf.host, hf.file)
			store, err := client.HostStore(e.home, hf.host)
			if err != nil {
				t.Fatal(err)
			}

			r := e.ok("clients", "connect", hf.host, "--dry-run")
			if !strings.Contains(r.stdout, "+++ "+path) || !strings.Contains(r.stdout, "Dry run") {
				t.Errorf("dry run: %s", r)
			}
			if !bytes.Equal(readFile(t, path), orig) {
				t.Fatal("--dry-run wrote the file")
			}
			if slices.Contains(e.agentIDs(), hf.host) {
				t.Fatal("--dry-run enrolled an agent")
			}

			r = e.ok("clients", "connect", hf.host)
			if !strings.Contains(r.stdout, "+++ "+path) || !strings.Contains(r.stdout, `Enrolled agent "`+hf.host+`"`) ||
				!strings.Contains(r.stdout, path+".plexus-backup") {
				t.Errorf("connect: %s", r)
			}
			creds, err := store.Credentials()
			if err != nil || creds.AgentID != hf.host {
				t.Fatalf("stored credential: %+v, %v", creds, err)
			}
			for p, want := range map[string]fs.FileMode{store.Dir(): 0o700, filepath.Join(store.Dir(), client.CredentialsFile): 0o600} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode().Perm(), err, want)
				}
			}
			if !bytes.Equal(readFile(t, path+".plexus-backup"), orig) {
				t.Error("the backup is not the file as it was")
			}
			h, _ := hosts.Lookup(hf.host)
			cfg, err := hosts.Read(h, path)
			if err != nil {
				t.Fatal(err)
			}
			want := hosts.Entry{Command: exe, Args: []string{"--home", e.home, "--addr", e.addr, "mcp", "serve", "--agent", hf.host}}
			if !cfg.Has(want) {
				p, _ := cfg.Plexus()
				t.Errorf("the entry is %+v, want %+v", p.Entry, want)
			}
			connected := readFile(t, path)

			r = e.ok("clients", "connect", hf.host)
			if !strings.Contains(r.stdout, "already connected") {
				t.Errorf("connect again: %s", r)
			}
			if ids := e.agentIDs(); len(slices.DeleteFunc(ids, func(id string) bool { return id != hf.host })) != 1 {
				t.Errorf("agents after connecting twice: %v", ids)
			}
			if !bytes.Equal(readFile(t, path), connected) {
				t.Error("connecting again changed the file")
			}

			var rows []listedHost
			e.jsonOut(&rows, "clients", "list", "--json")
			i := slices.IndexFunc(rows, func(s listedHost) bool { return s.Host == hf.host && s.Scope == "user" })
			if i < 0 || !rows[i].Installed || !rows[i].Connected || rows[i].Agent != hf.host || !rows[i].Enrolled || rows[i].Config != path {
				t.Errorf("clients list: %+v", rows)
			}
			if r := e.ok("clients", "list"); !strings.Contains(r.stdout, hf.host+"  ") || !strings.Contains(r.stdout, "yes (stdio)") {
				t.Errorf("%s", r)
			}

			r = e.ok("clients", "disconnect", hf.host)
			if !bytes.Equal(readFile(t, path), orig) {
				t.Errorf("disconnect did not give back the file: %s\n%s", r, readFile(t, path))
			}
			if _, err := store.Credentials(); err != nil {
				t.Error("disconnect without --revoke deleted the credential")
			}
		})
	}
}

// TestClientsConnectHTTP: with --http the entry holds the /mcp URL and the
// agent's PAT; the PAT is never printed, and is nowhere under --home but
// in the agent's credential; disconnect --revoke removes the entry, the
// agent and its credential.
func TestClientsConnectHTTP(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	path, orig := plantHostFile(t, env, "gemini", "gemini.json")

	e.notesDir()
	dry := e.ok("clients", "connect", "gemini", "--http", "--dry-run")
	r := e.ok("clients", "connect", "gemini", "--http", "--agent", "gem", "--grant", "portal.notes.read")
	store, err := client.HostStore(e.home, "gem")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := store.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	pat := creds.PAT
	if !strings.Contains(string(readFile(t, path)), `"httpUrl": "http://`+e.addr+`/mcp"`) ||
		!strings.Contains(string(readFile(t, path)), "Bearer "+pat) {
		t.Fatalf("the entry:\n%s", readFile(t, path))
	}
	if !strings.Contains(r.stdout, "The agent's PAT now sits in "+path) {
		t.Errorf("no notice of where the PAT is: %s", r)
	}
	var grants []plexus.StandingGrant
	e.jsonOut(&grants, "grants", "--json")
	if len(grants) != 1 || grants[0].AgentID != "gem" {
		t.Errorf("grants after connect --grant: %+v", grants)
	}
	// The host's agent calls with the stored credential, as plexus mcp
	// serve --agent does; clients list then says when.
	asHost := *e
	asHost.agentHome = store.Dir()
	call := asHost.ok("agent", "call", "portal.notes.read", "path=hello.md")
	var rows []listedHost
	list := e.ok("clients", "list", "--json")
	if err := json.Unmarshal([]byte(list.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rows, func(s listedHost) bool { return s.Host == "gemini" && s.Scope == "user" })
	if i < 0 || rows[i].Transport != "http" || rows[i].Agent != "gem" || rows[i].LastCall == nil {
		t.Errorf("clients list after a call: %+v", rows)
	}
	again := e.ok("clients", "connect", "gemini", "--http", "--agent", "gem")
	if !strings.Contains(again.stdout, "already connected") {
		t.Errorf("connect --http again: %s", again)
	}
	gone := e.ok("clients", "disconnect", "gemini", "--revoke", "--agent", "gem")
	for _, run := range []cliRun{dry, r, call, list, e.ok("clients", "list"), again, gone} {
		if strings.Contains(run.stdout+run.stderr, pat) {
			t.Errorf("the PAT was printed: %s", run)
		}
	}
	assertNotUnder(t, e.home, pat, store.Dir())
	for _, row := range e.journalLines() {
		b, _ := json.Marshal(row)
		if bytes.Contains(b, []byte(pat)) {
			t.Errorf("the PAT is in the journal: %s", b)
		}
	}

	if !bytes.Equal(readFile(t, path), orig) {
		t.Errorf("disconnect did not give back the file:\n%s", readFile(t, path))
	}
	if slices.Contains(e.agentIDs(), "gem") {
		t.Error("--revoke left the agent")
	}
	if _, err := os.Stat(store.Dir()); !os.IsNotExist(err) {
		t.Errorf("--revoke left the credential: %v", err)
	}
}

// assertNotUnder fails if any file under root but those under except
// holds secret.
func assertNotUnder(t *testing.T, root, secret, except string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, except+string(filepath.Separator)) || !d.Type().IsRegular() {
			return err
		}
		if bytes.Contains(readFile(t, p), []byte(secret)) {
			t.Errorf("%s holds the PAT", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestClientsReconnect: a host whose agent is enrolled but whose entry
// went away (disconnect without --revoke, a hand edit) gets its entry back
// without a second enrollment.
func TestClientsReconnect(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	path, _ := plantHostFile(t, env, "windsurf", "windsurf.json")
	e.ok("clients", "connect", "windsurf")
	connected := readFile(t, path)
	store, err := client.HostStore(e.home, "windsurf")
	if err != nil {
		t.Fatal(err)
	}
	first, err := store.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	e.ok("clients", "disconnect", "windsurf")
	r := e.ok("clients", "connect", "windsurf")
	if !strings.Contains(r.stdout, "already enrolled") || strings.Contains(r.stdout, "Enrolled agent") {
		t.Errorf("%s", r)
	}
	if !bytes.Equal(readFile(t, path), connected) {
		t.Errorf("the entry did not come back as it was:\n%s", readFile(t, path))
	}
	if again, err := store.Credentials(); err != nil || again.PAT != first.PAT {
		t.Error("the agent was enrolled again")
	}
}

// TestClientsConnectScopesAndCustom: --scope project writes the project
// file in the current folder; --config/--format edit any file; Claude
// Desktop refuses --http.
func TestClientsConnectScopesAndCustom(t *testing.T) {
	hostHome(t)
	e, _ := newCLIEnv(t)
	project := t.TempDir()
	t.Chdir(project)

	// A project's file is often committed: no PAT goes into it.
	for _, args := range [][]string{
		{"clients", "connect", "claude-code", "--scope", "project", "--http"},
		{"mcp", "import", "claude-code", "--scope", "project", "--replace-in-host", "--http"},
	} {
		r := e.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "without --http") || !strings.Contains(r.stderr, "--scope user") {
			t.Errorf("%v: %s", args, r)
		}
		for _, p := range []string{filepath.Join(project, ".mcp.json"), filepath.Join(e.home, "clients", "claude-code")} {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v left %s: %v", args, p, err)
			}
		}
	}

	e.ok("clients", "connect", "cursor", "--scope", "project")
	if _, err := os.Stat(filepath.Join(project, ".cursor", "mcp.json")); err != nil {
		t.Errorf("no project file: %v", err)
	}

	custom := filepath.Join(t.TempDir(), "my.toml")
	if err := os.WriteFile(custom, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("clients", "connect", "myhost", "--config", custom, "--format", "codex-toml")
	if got := string(readFile(t, custom)); !strings.HasPrefix(got, "# mine\n\n[mcp_servers.plexus]\n") {
		t.Errorf("custom file:\n%s", got)
	}

	r := e.run("clients", "connect", "claude-desktop", "--http")
	if r.code != exitError || !strings.Contains(r.stderr, "without --http") {
		t.Errorf("claude-desktop --http: %s", r)
	}
	r = e.run("clients", "connect", "notepad")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown host") {
		t.Errorf("unknown host: %s", r)
	}
	r = e.run("clients", "connect", "windsurf", "--scope", "project")
	if r.code != exitUsage || !strings.Contains(r.stderr, "no project file") {
		t.Errorf("windsurf --scope project: %s", r)
	}
}

// initializedEnv is a command line over an initialized home with no daemon
// running: what `mcp import` needs, and proof that it starts nothing.
func initializedEnv(t *testing.T) *cliEnv {
	t.Helper()
	e := offlineEnv(t, filepath.Join(t.TempDir(), "home"))
	e.ok("init")
	return e
}

// mcpServersOf reads mcp.json's servers.
func (e *cliEnv) mcpServersOf() map[string]map[string]any {
	e.t.Helper()
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(readFile(e.t, filepath.Join(e.home, "mcp.json")), &doc); err != nil {
		e.t.Fatalf("mcp.json: %v", err)
	}
	return doc.MCPServers
}

// TestMCPImport: each host's servers go into mcp.json under their names,
// in mcp.json's shape, whatever the host calls its keys; a name mcp.json
// has is never overwritten; what mcp.json refuses stays out, with the
// reason; importing again changes nothing.
func TestMCPImport(t *testing.T) {
	env := hostHome(t)
	e := initializedEnv(t)
	e.ok("mcp", "add", "github", "--url", "https://example.com/mcp")
	before := e.mcpServersOf()["github"]

	plantHostFile(t, env, "claude-code", "claude-code.json")
	r := e.ok("mcp", "import", "claude-code")
	if !strings.Contains(r.stdout, `"filesystem": imported`) || !strings.Contains(r.stdout, `"github": not imported: mcp.json already has`) {
		t.Errorf("%s", r)
	}
	plantHostFile(t, env, "codex", "codex.toml")
	r = e.ok("mcp", "import", "codex")
	if !strings.Contains(r.stdout, `"docs": imported (not carried over: startup_timeout_sec)`) || !strings.Contains(r.stdout, "plexus secrets set") {
		t.Errorf("%s", r)
	}
	plantHostFile(t, env, "gemini", "gemini.json")
	r = e.ok("mcp", "import", "gemini")
	if !strings.Contains(r.stdout, `"events": not imported:`) || !strings.Contains(r.stdout, "SSE") ||
		!strings.Contains(r.stdout, `"git": imported (not carried over: cwd, timeout, trust)`) {
		t.Errorf("%s", r)
	}

	got := e.mcpServersOf()
	want := map[string]map[string]any{
		"github":     before,
		"filesystem": {"command": "npx", "args": []any{"-y", "@modelcontextprotocol/server-filesystem", "/home/owner/docs"}, "env": map[string]any{}},
		"docs":       {"command": "npx", "args": []any{"-y", "@example/docs-mcp"}, "env": map[string]any{"DOCS_TOKEN": "t0k"}},
		"figma":      {"url": "http://127.0.0.1:3845/mcp", "headers": map[string]any{"X-Figma-Region": "eu"}},
		"git":        {"command": "uvx", "args": []any{"mcp-server-git"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mcp.json servers:\n got %v\nwant %v", got, want)
	}

	mcpJSON := readFile(t, filepath.Join(e.home, "mcp.json"))
	r = e.ok("mcp", "import", "codex")
	if !strings.Contains(r.stdout, `"docs": already in mcp.json`) || !bytes.Equal(readFile(t, filepath.Join(e.home, "mcp.json")), mcpJSON) {
		t.Errorf("importing again: %s", r)
	}

	// Replacing in the host needs every server in mcp.json.
	path, orig := plantHostFile(t, env, "gemini", "gemini.json")
	r = e.run("mcp", "import", "gemini", "--replace-in-host")
	if r.code != exitError || !strings.Contains(r.stderr, `keeps its servers: "github", "events"`) || !bytes.Equal(readFile(t, path), orig) {
		t.Errorf("--replace-in-host with a server left out: %s", r)
	}
}

// TestMCPImportReplaceInHost: with --replace-in-host the host's servers
// move into mcp.json and its file keeps only the plexus entry, its agent
// enrolled, the file as it was kept beside it.
func TestMCPImportReplaceInHost(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	h, _ := hosts.Lookup("cursor")
	path, err := h.Path(env, hosts.ScopeUser)
	if err != nil {
		t.Fatal(err)
	}
	orig := []byte("{\n  // mine\n  \"mcpServers\": {\n    \"quiet\": {\"command\": \"/usr/bin/true\"},\n    \"local\": {\"url\": \"http://127.0.0.1:1/mcp\"}\n  },\n  \"theme\": \"dark\"\n}\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.ok("mcp", "import", "cursor", "--replace-in-host")
	if !strings.Contains(r.stdout, `"quiet": imported`) || !strings.Contains(r.stdout, `Enrolled agent "cursor"`) {
		t.Errorf("%s", r)
	}
	if got := e.mcpServersOf(); len(got) != 2 || got["quiet"]["command"] != "/usr/bin/true" || got["local"]["url"] != "http://127.0.0.1:1/mcp" {
		t.Errorf("mcp.json servers: %v", got)
	}
	cfg, err := hosts.Read(h, path)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := cfg.Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || servers[0].Name != hosts.EntryName {
		t.Errorf("the host's servers after the move: %+v\n%s", servers, readFile(t, path))
	}
	if got := string(readFile(t, path)); !strings.Contains(got, "// mine") || !strings.Contains(got, `"theme": "dark"`) {
		t.Errorf("the rest of the host's file changed:\n%s", got)
	}
	if !bytes.Equal(readFile(t, path+".plexus-backup"), orig) {
		t.Error("no backup of the host's file as it was")
	}
	if !slices.Contains(e.agentIDs(), "cursor") {
		t.Error("the host's agent was not enrolled")
	}
}

// TestClientsConnectView: clients connect takes the view flags of agents
// view: a bad view is refused before anything is enrolled or written, a
// dry run sets no view, and a connect writes the host agent's view into
// mcp-views.json, which agents view then shows.
func TestClientsConnectView(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	path, orig := plantHostFile(t, env, "cursor", "cursor.json")
	views := filepath.Join(e.home, "mcp-views.json")

	r := e.run("clients", "connect", "cursor", "--names", "original", "--only", "mcp.a.x", "--only", "mcp.b.y")
	if r.code != exitUsage {
		t.Fatalf("a view of two servers under original names: %s", r)
	}
	if !bytes.Equal(readFile(t, path), orig) {
		t.Error("a refused view changed the host's file")
	}
	var agents []plexus.Agent
	e.jsonOut(&agents, "agents", "list", "--json")
	if len(agents) != 0 {
		t.Errorf("a refused view enrolled %v", agents)
	}

	e.ok("clients", "connect", "cursor", "--only", "portal.*", "--dry-run")
	if _, err := os.Stat(views); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dry run wrote the views file: %v", err)
	}

	r = e.ok("clients", "connect", "cursor", "--only", "portal.*", "--mode", "tools")
	if !strings.Contains(r.stdout, `MCP view of agent "cursor"`) || !strings.Contains(r.stdout, "shows: portal.*") {
		t.Errorf("connect did not say the view:\n%s", r.stdout)
	}
	var v struct {
		Only []string `json:"only"`
		Mode string   `json:"mode"`
	}
	e.jsonOut(&v, "agents", "view", "cursor", "--json")
	if len(v.Only) != 1 || v.Only[0] != "portal.*" || v.Mode != "tools" {
		t.Errorf("agents view cursor = %+v, want only [portal.*], mode tools", v)
	}
}

// plantLocalFile writes Claude Code's ~/.claude.json from testdata with its
// project section keyed by project, and returns the path and the bytes.
func plantLocalFile(t *testing.T, env hosts.Env, project string) (string, []byte) {
	t.Helper()
	path, b := plantHostFile(t, env, "claude-code", "claude-code.json")
	key, err := json.Marshal(project)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"/home/owner/src/app"`), key, 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// localServers reads the plexus entry of project's local scope and of the
// user scope in Claude Code's file at path.
func localAndUser(t *testing.T, path, project string) (local, user *hosts.Server) {
	t.Helper()
	h, err := hosts.Lookup("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	lh, _, err := h.Locate(hosts.Env{GOOS: runtime.GOOS, Home: "/unused", ProjectDir: project}, hosts.ScopeLocal)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range []struct {
		h   hosts.Host
		out **hosts.Server
	}{{lh, &local}, {h, &user}} {
		cfg, err := hosts.Read(pair.h, path)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := cfg.Plexus(); ok {
			*pair.out = &s
		}
	}
	return local, user
}

// TestClientsLocalScope: with the built binary against a real daemon,
// `clients connect claude-code --scope local` writes the plexus entry into
// ~/.claude.json under projects["<this folder>"].mcpServers (or --project
// DIR's), beside that project's own server, and nowhere else; clients list
// says the local scope holds it; disconnect --scope local gives the file
// back byte for byte. Other hosts refuse --scope local naming their
// scopes.
func TestClientsLocalScope(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path, orig := plantLocalFile(t, env, project)
	plexusBin(t) // built from the module before leaving it
	t.Chdir(project)

	r := e.run("clients", "connect", "cursor", "--scope", "local")
	if r.code != exitUsage || !strings.Contains(r.stderr, "Cursor has no local scope: its scopes are user, project") {
		t.Errorf("cursor --scope local: %s", r)
	}

	r = e.ok("clients", "connect", "claude-code", "--scope", "local", "--dry-run")
	if !strings.Contains(r.stdout, `"plexus": {`) || !bytes.Equal(readFile(t, path), orig) {
		t.Fatalf("dry run: %s", r)
	}
	e.ok("clients", "connect", "claude-code", "--scope", "local")
	local, user := localAndUser(t, path, project)
	if local == nil || user != nil || !slices.Contains(local.Entry.Args, "claude-code") {
		t.Fatalf("after connect --scope local: local %+v, user %+v\n%s", local, user, readFile(t, path))
	}
	h, _ := hosts.Lookup("claude-code")
	lh, _, _ := h.Locate(hosts.Env{GOOS: runtime.GOOS, Home: env.Home, ProjectDir: project}, hosts.ScopeLocal)
	cfg, err := hosts.Read(lh, path)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := cfg.Servers(); len(s) != 2 || s[0].Name != "local-db" {
		t.Errorf("the project's servers: %+v", s)
	}

	var rows []struct {
		listedHost
		Project string `json:"project"`
	}
	e.jsonOut(&rows, "clients", "list", "--json")
	i := slices.IndexFunc(rows, func(s struct {
		listedHost
		Project string `json:"project"`
	}) bool {
		return s.Host == "claude-code" && s.Scope == "local"
	})
	if i < 0 || !rows[i].Connected || rows[i].Project != project || rows[i].Config != path || rows[i].Agent != "claude-code" {
		t.Errorf("clients list: %+v", rows)
	}
	if r := e.ok("clients", "list"); !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 3 && f[0] == "claude-code" && f[1] == "local" && strings.Contains(l, "yes (stdio)") && strings.HasSuffix(l, `(projects["`+project+`"])`)
	}) {
		t.Errorf("clients list table:\n%s", r.stdout)
	}

	e.ok("clients", "disconnect", "claude-code", "--scope", "local")
	if got := readFile(t, path); !bytes.Equal(got, orig) {
		t.Errorf("disconnect --scope local did not give the file back:\n%s", got)
	}

	// --project names another folder: its section is made, this one's
	// stays as it is.
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.ok("clients", "connect", "claude-code", "--scope", "local", "--project", other)
	if local, _ := localAndUser(t, path, other); local == nil {
		t.Errorf("--project: no entry under %s:\n%s", other, readFile(t, path))
	}
	if local, _ := localAndUser(t, path, project); local != nil {
		t.Error("--project wrote this folder's section")
	}
}

// TestMCPImportLocalScope: `mcp import claude-code` imports the user's
// servers and the ones Claude Code keeps for this project alone; --scope
// local imports only the latter.
func TestMCPImportLocalScope(t *testing.T) {
	env := hostHome(t)
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plantLocalFile(t, env, project)
	plexusBin(t) // built from the module before leaving it
	t.Chdir(project)

	e := initializedEnv(t)
	r := e.ok("mcp", "import", "claude-code", "--scope", "local")
	if got := e.mcpServersOf(); got["local-db"] == nil || got["filesystem"] != nil {
		t.Errorf("--scope local imported %v\n%s", slices.Collect(maps.Keys(got)), r)
	}

	e = initializedEnv(t)
	r = e.ok("mcp", "import", "claude-code")
	got := e.mcpServersOf()
	if got["local-db"] == nil || got["filesystem"] == nil || got["github"] == nil {
		t.Errorf("imported %v\n%s", slices.Collect(maps.Keys(got)), r)
	}
	if !strings.Contains(r.stdout, "local servers of the project "+project) || !strings.Contains(r.stdout, "Added 3 servers") {
		t.Errorf("%s", r)
	}
}

// TestClientsRestore: with the built binary, a disconnect keeps a backup;
// restore --list shows it; restore --dry-run prints the diff and writes
// nothing; restore puts the file back and keeps the file it replaced, so
// a second restore undoes the first. A backup that is not one Plexus kept
// of that file, or a link under a backup's name, is refused and nothing
// changes.
func TestClientsRestore(t *testing.T) {
	env := hostHome(t)
	e := initializedEnv(t)
	path, orig := plantHostFile(t, env, "cursor", "cursor.json")
	h, _ := hosts.Lookup("cursor")
	cfg, err := hosts.Read(h, path)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := cfg.Upsert(hosts.Entry{Command: "/bin/plexus", Args: []string{"mcp", "serve", "--agent", "cursor"}})
	if err != nil {
		t.Fatal(err)
	}
	connected := ed.New
	if err := os.WriteFile(path, connected, 0o644); err != nil {
		t.Fatal(err)
	}

	if r := e.ok("clients", "restore", "cursor", "--list"); !strings.Contains(r.stdout, "Plexus kept no backup of "+path) {
		t.Errorf("%s", r)
	}
	e.ok("clients", "disconnect", "cursor")
	if !bytes.Equal(readFile(t, path), orig) {
		t.Fatal("disconnect did not remove the entry")
	}
	var list []struct {
		Path string    `json:"path"`
		Time time.Time `json:"time"`
	}
	e.jsonOut(&list, "clients", "restore", "cursor", "--list", "--json")
	if len(list) != 1 || list[0].Path != path+".plexus-backup" || list[0].Time.IsZero() {
		t.Fatalf("backups: %+v", list)
	}

	r := e.ok("clients", "restore", "cursor", "--dry-run")
	if !strings.Contains(r.stdout, `+        "plexus": {`) || !bytes.Equal(readFile(t, path), orig) {
		t.Fatalf("dry run: %s", r)
	}
	e.ok("clients", "restore", "cursor")
	if !bytes.Equal(readFile(t, path), connected) {
		t.Fatalf("restore did not put the backup back:\n%s", readFile(t, path))
	}
	e.jsonOut(&list, "clients", "restore", "cursor", "--list", "--json")
	if len(list) != 2 || !bytes.Equal(readFile(t, list[0].Path), orig) {
		t.Fatalf("the file a restore replaced is not the newest backup: %+v", list)
	}
	e.ok("clients", "restore", "cursor")
	if !bytes.Equal(readFile(t, path), orig) {
		t.Fatal("a second restore did not undo the first")
	}

	// Attacks: nothing changes, no backup is made.
	before := readFile(t, path)
	elsewhere := filepath.Join(t.TempDir(), "mcp.json.plexus-backup")
	if err := os.WriteFile(elsewhere, []byte(`{"mcpServers": {"evil": {"command": "evil"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path+".plexus-backup.9"); err != nil {
		t.Fatal(err)
	}
	for _, backup := range []string{elsewhere, path + ".plexus-backup.9", filepath.Join(filepath.Dir(path), "settings.json.plexus-backup")} {
		r := e.run("clients", "restore", "cursor", "--backup", backup)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is not a backup Plexus kept of "+path) {
			t.Errorf("--backup %s: %s", backup, r)
		}
	}
	e.jsonOut(&list, "clients", "restore", "cursor", "--list", "--json")
	if !bytes.Equal(readFile(t, path), before) || len(list) != 3 {
		t.Errorf("an attack changed something: %d backups", len(list))
	}
}
