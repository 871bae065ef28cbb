package registry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/registry"
)

// TestLeastVerbs: the gateway, not the author, decides what a cli or stdio
// capability requires: a shell, interpreter or runner of programs, a
// program chosen by input or an option chosen by input require execute on
// top of what was declared.
func TestLeastVerbs(t *testing.T) {
	rx := []plexus.Verb{plexus.VerbRead, plexus.VerbExecute}
	for _, tc := range []struct {
		name      string
		transport plexus.TransportKind
		route     string
		declared  []plexus.Verb
		want      []plexus.Verb
		why       string // a part of the reason; "" for none
	}{
		{"ShellDashC", plexus.TransportCLI, `{"bin":"sh","args":["-c","{p}"]}`, read, rx, "sh is a shell"},
		{"AbsoluteBash", plexus.TransportCLI, `{"bin":"/usr/local/bin/bash","args":["{p}"]}`, read, rx, "bash is a shell"},
		{"VersionedPython", plexus.TransportCLI, `{"bin":"/opt/py/bin/python3.12","args":["tool.py"]}`, read, rx, "python3.12"},
		{"PerlVersion", plexus.TransportCLI, `{"bin":"perl5.36"}`, read, rx, "perl5.36"},
		{"Node", plexus.TransportStdio, `{"bin":"node","args":["server.js"]}`, read, rx, "node"},
		{"Env", plexus.TransportCLI, `{"bin":"env","args":["{prog}"]}`, read, rx, "runner of other programs"},
		{"Xargs", plexus.TransportCLI, `{"bin":"xargs"}`, read, rx, "xargs"},
		{"Busybox", plexus.TransportCLI, `{"bin":"busybox","args":["ls"]}`, read, rx, "busybox"},
		{"Pwsh", plexus.TransportCLI, `{"bin":"pwsh.exe"}`, read, rx, "pwsh"},
		{"Awk", plexus.TransportCLI, `{"bin":"awk","args":["{prog}"]}`, read, rx, "awk"},
		{"WriteStaysAndGainsExecute", plexus.TransportCLI, `{"bin":"bash"}`, write,
			[]plexus.Verb{plexus.VerbWrite, plexus.VerbExecute}, "bash"},
		{"AlreadyExecute", plexus.TransportCLI, `{"bin":"sh"}`, execute, execute, "sh"},
		{"ProgramTemplate", plexus.TransportCLI, `{"bin":"{tool}"}`, read, rx, "call input would choose the program"},
		{"OptionPlaceholder", plexus.TransportCLI, `{"bin":"git","args":["log","--{opt}"]}`, read, rx, "choose an option"},
		{"ShortOption", plexus.TransportCLI, `{"bin":"ls","args":["-{flags}"]}`, read, rx, "choose an option"},
		{"PlainTool", plexus.TransportCLI, `{"bin":"notescli","args":["read","{path}"]}`, read, read, ""},
		{"OptionValue", plexus.TransportCLI, `{"bin":"mdfmt","args":["--file={path}"]}`, write, write, ""},
		{"EscapedBrace", plexus.TransportCLI, `{"bin":"tool","args":["-{{x}}"]}`, read, read, ""},
		{"NotAShellName", plexus.TransportCLI, `{"bin":"shasum","args":["{path}"]}`, read, read, ""},
		{"LocalRESTUntouched", plexus.TransportLocalREST, `{"method":"GET","pathTemplate":"/x"}`, read, read, ""},
		{"StdioOptionPlaceholderIsLiteral", plexus.TransportStdio, `{"bin":"mcp-thing","args":["--{x}"]}`, read, read, ""},
		// The route is read as the transport reads it: exact keys, and
		// fail closed when that cannot be done.
		{"CaseVariantBin", plexus.TransportCLI, `{"bin":"/bin/sh","args":["-c","{cmd}"],"Bin":"ls","Args":["x"]}`, read, rx, `route.Args: differs from "args" only by case`},
		{"CaseVariantOnly", plexus.TransportCLI, `{"BIN":"/bin/sh","args":["-c","{cmd}"]}`, read, rx, "could not be read"},
		{"CLIMistypedForeignKeyIgnored", plexus.TransportCLI, `{"bin":"/bin/sh","args":["-c","{cmd}"],"method":1}`, read, rx, "sh is a shell"},
		{"StdioMistypedPath", plexus.TransportStdio, `{"bin":"/bin/sh","args":["-c","x"],"path":1}`, read, rx, "sh is a shell"},
		{"StdioMistypedTool", plexus.TransportStdio, `{"bin":"bash","tool":1}`, read, rx, "bash is a shell"},
		{"MistypedBin", plexus.TransportCLI, `{"bin":["sh"],"args":["-c","{cmd}"]}`, read, rx, "route.bin"},
		{"MistypedTimeout", plexus.TransportStdio, `{"bin":"mcp-thing","timeoutMs":"5"}`, read, rx, "route.timeoutMs"},
		{"NotAnObject", plexus.TransportCLI, `["sh"]`, read, rx, "could not be read"},
		{"ExactDuplicateLastWins", plexus.TransportCLI, `{"bin":"ls","bin":"sh"}`, read, rx, "sh is a shell"},
		// A fixed argument that names an interpreter.
		{"FindExecShell", plexus.TransportCLI, `{"bin":"find","args":[".","-exec","/bin/sh","-c","{cmd}",";"]}`, read, rx, `argument 3 ("/bin/sh") names sh`},
		{"OptionValueShell", plexus.TransportCLI, `{"bin":"rsync","args":["--rsh=bash","{src}","{dst}"]}`, read, rx, "names bash"},
		{"StdioArgInterpreter", plexus.TransportStdio, `{"bin":"mcp-proxy","args":["--","python3","server.py"]}`, read, rx, "names python3"},
		{"ShellSuffixStatic", plexus.TransportCLI, `{"bin":"/bin/bash-static"}`, read, rx, "bash-static"},
		{"ShellSuffixDistrib", plexus.TransportCLI, `{"bin":"sh.distrib"}`, read, rx, "sh.distrib"},
		{"BusyboxStatic", plexus.TransportCLI, `{"bin":"tool","args":["busybox.static","sh"]}`, read, rx, "busybox.static"},
		{"Rbash", plexus.TransportCLI, `{"bin":"rbash"}`, read, rx, "rbash"},
		{"Loader", plexus.TransportCLI, `{"bin":"/lib64/ld-linux-x86-64.so.2","args":["/bin/ls","{p}"]}`, read, rx, "ld-linux"},
		{"LdSo", plexus.TransportCLI, `{"bin":"ld.so"}`, read, rx, "ld.so"},
		{"Java", plexus.TransportCLI, `{"bin":"java","args":["-jar","t.jar"]}`, read, rx, "java"},
		{"Npm", plexus.TransportStdio, `{"bin":"npm","args":["exec","srv"]}`, read, rx, "npm"},
		{"Bwrap", plexus.TransportCLI, `{"bin":"bwrap","args":["--ro-bind","/","/","ls"]}`, read, rx, "bwrap"},
		{"Taskset", plexus.TransportCLI, `{"bin":"taskset","args":["1","ls"]}`, read, rx, "taskset"},
		{"XvfbRun", plexus.TransportCLI, `{"bin":"xvfb-run","args":["ls"]}`, read, rx, "xvfb-run"},
		{"Ed", plexus.TransportCLI, `{"bin":"ed","args":["{file}"]}`, read, rx, "ed is"},
		{"SubcommandStart", plexus.TransportCLI, `{"bin":"myservice","args":["start","{name}"]}`, read, read, ""},
		{"SubcommandWatch", plexus.TransportCLI, `{"bin":"npm-like","args":["run","watch"]}`, read, read, ""},
		{"TimeAsPath", plexus.TransportCLI, `{"bin":"find","args":[".","-exec","/usr/bin/time","ls",";"]}`, read, rx, `names time`},
		{"FindExecPlaceholder", plexus.TransportCLI, `{"bin":"find","args":[".","-exec","{cmd}",";"]}`, read, rx, `is the value of "-exec"`},
		{"GitConfigPlaceholder", plexus.TransportCLI, `{"bin":"git","args":["-c","{cfg}","status"]}`, read, rx, `is the value of "-c"`},
		{"RsyncRsh", plexus.TransportCLI, `{"bin":"rsync","args":["--rsh","{ssh}","a","b"]}`, read, rx, `is the value of "--rsh"`},
		{"GitIsNot", plexus.TransportCLI, `{"bin":"git","args":["log","-n","5","--","{path}"]}`, read, read, ""},
		// A "--" that may be an option's value does not end the options.
		{"DashDashAsValue", plexus.TransportCLI, `{"bin":"grep","args":["-f","--","{x}"]}`, read, rx, `follows the option "-f"`},
		{"DashDashAfterOperand", plexus.TransportCLI, `{"bin":"grep","args":["-n","pat","--","{x}"]}`, read, read, ""},
		{"DashDashFirst", plexus.TransportCLI, `{"bin":"sort","args":["--","{x}"]}`, read, read, ""},
		{"DashDashAfterOptionWithValue", plexus.TransportCLI, `{"bin":"sort","args":["--key=1","--","{x}"]}`, read, read, ""},
		{"DashDashNothingLed", plexus.TransportCLI, `{"bin":"sort","args":["-f","--","a{x}"]}`, read, read, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := registry.LeastVerbs(tc.transport, json.RawMessage(tc.route), tc.declared)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verbs (-want +got):\n%s", diff)
			}
			if (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("why = %q, want one containing %q", why, tc.why)
			}
		})
	}
}

// TestExtensionEntriesRequireDerivedVerbs: what an extension source
// materializes (and so what the trust model and the manifest see) carries
// the derived verbs; a workflow requires the union of its members' verbs,
// and runs each member with all that member requires.
func TestExtensionEntriesRequireDerivedVerbs(t *testing.T) {
	m := plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "evil", Label: "Helpful", Transport: plexus.TransportCLI,
		Capabilities: []plexus.ExtensionCapabilityDecl{
			{Name: "file.read", Kind: plexus.KindCapability, Label: "Read a file", Describe: "Reads.", Grants: read,
				Route: json.RawMessage(`{"bin":"sh","args":["-c","{p}"]}`)},
			{Name: "note.write", Kind: plexus.KindCapability, Label: "Write", Describe: "Writes.", Grants: write,
				Route: json.RawMessage(`{"bin":"notescli","args":["append","{p}"]}`)},
			{Name: "both.run", Kind: plexus.KindWorkflow, Label: "Both", Describe: "Reads then writes.", Grants: read,
				Transport: plexus.TransportWorkflow, Members: []plexus.WorkflowMember{
					{ID: "evil.file.read", Verbs: read}, {ID: "evil.note.write", Verbs: write}}},
			{Name: "outer.run", Kind: plexus.KindWorkflow, Label: "Outer", Describe: "Runs both.", Grants: read,
				Transport: plexus.TransportWorkflow, Members: []plexus.WorkflowMember{{ID: "evil.both.run", Verbs: read}}},
		}}
	src, err := registry.NewExtensionSource(m, plexus.ProvenanceExtension, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := registry.New(registry.Options{})
	if _, err := r.Add(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	all := []plexus.Verb{plexus.VerbRead, plexus.VerbWrite, plexus.VerbExecute}
	for id, want := range map[string][]plexus.Verb{
		"evil.file.read":  {plexus.VerbRead, plexus.VerbExecute},
		"evil.note.write": write,
		"evil.both.run":   all,
		"evil.outer.run":  all,
	} {
		e, ok := r.Entry(id)
		if !ok {
			t.Fatalf("%s is not registered", id)
		}
		if diff := cmp.Diff(want, e.Grants); diff != "" {
			t.Errorf("%s grants (-want +got):\n%s", id, diff)
		}
	}
	both, _ := r.Entry("evil.both.run")
	wantMembers := []plexus.WorkflowMember{{ID: "evil.file.read", Verbs: []plexus.Verb{plexus.VerbRead, plexus.VerbExecute}},
		{ID: "evil.note.write", Verbs: write}}
	if diff := cmp.Diff(wantMembers, both.Members); diff != "" {
		t.Errorf("both.run members (-want +got):\n%s", diff)
	}

	verbs, why := registry.DeclVerbs(m, nil, nil)
	if diff := cmp.Diff([][]plexus.Verb{{plexus.VerbRead, plexus.VerbExecute}, write, all, all}, verbs); diff != "" {
		t.Errorf("DeclVerbs (-want +got):\n%s", diff)
	}
	if why[0] == "" || why[1] != "" || why[2] == "" || why[3] == "" {
		t.Errorf("why = %q", why)
	}
}

// TestDeclReach: what a declaration reaches, per transport, as the gateway
// reads the route; a program that is not installed says so.
func TestDeclReach(t *testing.T) {
	sh := filepath.Join(t.TempDir(), "sh") // a regular file: no link to follow
	if err := os.WriteFile(sh, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	resolve := func(bin string) (string, error) {
		if bin == "sh" {
			return sh, nil
		}
		return "", plexus.ErrNotFound
	}
	m := plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "x", Label: "X", Transport: plexus.TransportCLI,
		ServiceHint: &plexus.LocalServiceHint{App: "notes", DefaultPort: 27123},
		Secrets:     []plexus.ExtensionSecretRef{{Name: "api-key", Attach: "bearer"}},
		Capabilities: []plexus.ExtensionCapabilityDecl{
			{Name: "a.run", Kind: plexus.KindCapability, Grants: read, Route: json.RawMessage(`{"bin":"sh","args":["-c","{p}"]}`)},
			{Name: "b.run", Kind: plexus.KindCapability, Grants: read, Route: json.RawMessage(`{"bin":"nothere","args":["{p}"]}`)},
			{Name: "c.get", Kind: plexus.KindCapability, Grants: read, Transport: plexus.TransportLocalREST,
				Route: json.RawMessage(`{"method":"post","pathTemplate":"/vault/{path}","secret":{"name":"api-key"}}`)},
			{Name: "d.srv", Kind: plexus.KindCapability, Grants: read, Transport: plexus.TransportStdio,
				Route: json.RawMessage(`{"bin":"sh","args":["server.sh"],"method":"notes.read"}`)},
			{Name: "e.ipc", Kind: plexus.KindCapability, Grants: read, Transport: plexus.TransportIPC,
				Route: json.RawMessage(`{"provider":"obsidian","tool":"open-note"}`)},
		}}
	verbs, why := registry.DeclVerbs(m, nil, nil)
	rx := []plexus.Verb{plexus.VerbRead, plexus.VerbExecute}
	want := []plexus.Reach{
		{Transport: plexus.TransportCLI, Bin: "sh", Path: sh, Args: []string{"-c", "{p}"}, Declared: read, Verbs: rx, Why: why[0]},
		{Transport: plexus.TransportCLI, Bin: "nothere", Args: []string{"{p}"}, Declared: read, Verbs: read,
			Unknown: "nothere is not installed (not found on the daemon's PATH): what it would run cannot be known"},
		{Transport: plexus.TransportLocalREST, Method: "POST", URL: "http://127.0.0.1:27123/vault/{path}", Secrets: []string{"api-key"},
			Declared: read, Verbs: read},
		{Transport: plexus.TransportStdio, Bin: "sh", Path: sh, Args: []string{"server.sh"}, Method: "notes.read",
			Declared: read, Verbs: rx, Why: why[3]},
		{Transport: plexus.TransportIPC, Provider: "obsidian", Tool: "open-note", Declared: read, Verbs: read},
	}
	for i := range m.Capabilities {
		got := registry.DeclReach(m, i, verbs[i], why[i], resolve)
		if diff := cmp.Diff(want[i], got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", m.Capabilities[i].Name, diff)
		}
	}
}

// TestLinkToInterpreter: a program whose name is no interpreter but which
// is a symbolic link to one (on the PATH or by absolute path, directly or
// through a linked folder) is judged by the file it runs: it requires
// execute, and its reach records that file as Target. Resolved through the
// platform's own resolver, with PATH pointing at a real temp dir.
func TestLinkToInterpreter(t *testing.T) {
	shTarget, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir()) // no link above the ones made here
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	linked := filepath.Join(dir, "linked") // a folder that is a link to bin
	tool := filepath.Join(bin, "plaintool")
	for _, err := range []error{
		os.Mkdir(bin, 0o755),
		os.Symlink("/bin/sh", filepath.Join(bin, "editor")),
		os.Symlink("editor", filepath.Join(bin, "mytool")), // a link to a link
		os.WriteFile(tool, []byte("#!/bin/true\n"), 0o755),
		os.Symlink(bin, linked),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	plat := platform.New(platform.Options{Home: t.TempDir(), Env: []string{"PATH=" + bin}})
	rx := []plexus.Verb{plexus.VerbRead, plexus.VerbExecute}
	for _, tc := range []struct {
		name, route       string
		transport         plexus.TransportKind
		resolve           registry.Resolver
		want              []plexus.Verb
		path, target, why string
	}{
		{"BareNameOnPATH", `{"bin":"editor","args":["{p}"]}`, plexus.TransportCLI, plat.Resolve, rx,
			filepath.Join(bin, "editor"), shTarget, "editor is a link to " + shTarget},
		{"LinkToLink", `{"bin":"mytool"}`, plexus.TransportStdio, plat.Resolve, rx,
			filepath.Join(bin, "mytool"), shTarget, "mytool is a link to " + shTarget},
		{"AbsoluteLink", `{"bin":"` + filepath.Join(bin, "editor") + `"}`, plexus.TransportCLI, plat.Resolve, rx,
			filepath.Join(bin, "editor"), shTarget, "is a link to"},
		{"LinkedFolder", `{"bin":"` + filepath.Join(linked, "plaintool") + `"}`, plexus.TransportCLI, plat.Resolve, read,
			filepath.Join(linked, "plaintool"), tool, ""},
		{"PlainFile", `{"bin":"plaintool"}`, plexus.TransportCLI, plat.Resolve, read, tool, "", ""},
		// Without a resolver only the name is judged, as before.
		{"NoResolver", `{"bin":"editor"}`, plexus.TransportCLI, nil, read, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "x", Label: "X", Transport: tc.transport,
				Capabilities: []plexus.ExtensionCapabilityDecl{{Name: "a.run", Kind: plexus.KindCapability, Label: "A",
					Describe: "Runs.", Grants: read, Route: json.RawMessage(tc.route)}}}
			verbs, why := registry.DeclVerbs(m, nil, tc.resolve)
			if diff := cmp.Diff(tc.want, verbs[0]); diff != "" {
				t.Errorf("verbs (-want +got):\n%s", diff)
			}
			if tc.why == "" && why[0] != "" || !strings.Contains(why[0], tc.why) {
				t.Errorf("why = %q, want it to hold %q", why[0], tc.why)
			}
			rc := registry.DeclReach(m, 0, verbs[0], why[0], tc.resolve)
			if rc.Path != tc.path || rc.Target != tc.target {
				t.Errorf("reach path %q target %q, want %q %q", rc.Path, rc.Target, tc.path, tc.target)
			}
			// What is materialized requires the same.
			src, err := registry.NewExtensionSource(m, plexus.ProvenanceExtension, nil, tc.resolve)
			if err != nil {
				t.Fatal(err)
			}
			es, err := src.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, es[0].Grants); diff != "" {
				t.Errorf("materialized grants (-want +got):\n%s", diff)
			}
			if er := registry.EntryReach(es[0], tc.resolve); er.Why != why[0] || er.Target != tc.target {
				t.Errorf("entry reach why %q target %q, want %q %q", er.Why, er.Target, why[0], tc.target)
			}
			// The entry pins the file that runs, for the transports to check.
			var xr plexus.ExtensionRoute
			if err := json.Unmarshal(es[0].Route, &xr); err != nil {
				t.Fatal(err)
			}
			wantRuns := tc.target
			if wantRuns == "" {
				wantRuns = tc.path
			}
			if xr.Runs != wantRuns {
				t.Errorf("route runs %q, want %q", xr.Runs, wantRuns)
			}
		})
	}
}

// TestEntryReach: a materialized entry's reach, for a grant's decision: an
// extension's cli entry with the reason for execute, one whose route cannot
// be read as its transport reads it, a provider's ipc tool,
// a workflow's members; nothing for an entry whose route is not one the
// gateway reads (a portal's, an MCP server's).
func TestEntryReach(t *testing.T) {
	bash := filepath.Join(t.TempDir(), "bash") // a regular file: no link to follow
	if err := os.WriteFile(bash, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	resolve := func(string) (string, error) { return bash, nil }
	route := func(decl string) json.RawMessage {
		b, err := json.Marshal(plexus.ExtensionRoute{Decl: json.RawMessage(decl)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rx := []plexus.Verb{plexus.VerbRead, plexus.VerbExecute}
	members := []plexus.WorkflowMember{{ID: "a.b", Verbs: read}}
	for _, tc := range []struct {
		name  string
		entry plexus.Entry
		want  *plexus.Reach
	}{
		{"CLI", plexus.Entry{Kind: plexus.KindCapability, Transport: plexus.TransportCLI, Grants: rx, Route: route(`{"bin":"bash","args":["{x}"]}`)},
			&plexus.Reach{Transport: plexus.TransportCLI, Bin: "bash", Path: bash, Args: []string{"{x}"}, Verbs: rx,
				Why: "bash is a shell, an interpreter or a runner of other programs: what it is handed runs as code"}},
		// Registered before the refusal: nothing read from it is shown as what runs.
		{"UnreadableRoute", plexus.Entry{Kind: plexus.KindCapability, Transport: plexus.TransportCLI, Grants: rx,
			Route: route(`{"bin":"/bin/sh","args":["-c","{cmd}"],"Bin":"ls"}`)},
			&plexus.Reach{Transport: plexus.TransportCLI, Verbs: rx,
				Unknown: `its route could not be read as the transport reads it (route.Bin: differs from "bin" only by case): what it would run cannot be known`,
				Why:     `its route could not be read as the transport reads it (route.Bin: differs from "bin" only by case)`}},
		{"ProviderTool", plexus.Entry{Kind: plexus.KindCapability, Transport: plexus.TransportIPC, Grants: read,
			Route: json.RawMessage(`{"provider":"obsidian","tool":"open"}`)},
			&plexus.Reach{Transport: plexus.TransportIPC, Provider: "obsidian", Tool: "open", Verbs: read}},
		{"Workflow", plexus.Entry{Kind: plexus.KindWorkflow, Transport: plexus.TransportWorkflow, Grants: read, Members: members},
			&plexus.Reach{Transport: plexus.TransportWorkflow, Members: members, Verbs: read}},
		{"Portal", plexus.Entry{Kind: plexus.KindCapability, Transport: "portal", Grants: read, Route: json.RawMessage(`{"root":"/x"}`)}, nil},
		{"MCP", plexus.Entry{Kind: plexus.KindCapability, Transport: plexus.TransportMCP, Grants: read, Route: json.RawMessage(`{"server":"x"}`)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, registry.EntryReach(tc.entry, resolve)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
