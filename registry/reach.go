package registry

// This file holds the gateway's own reading of an extension entry: the
// least verbs it requires whatever its author declared, and what it
// reaches (the program, URL, provider or members), for the owner to see
// before approving.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/plexus-gw/plexus"
)

// Interpreter reports whether bin (a bare name or a path) names a program
// that runs whatever it is handed as code or as another program: a shell, a
// language interpreter, a runner of other commands, or the dynamic loader.
// It matches the base name, lower-cased, without ".exe" and without a
// version suffix, so "/usr/bin/python3.12", "perl5.36" and "lua5.4" match;
// a shell also matches with any suffix after "-" or "." ("bash-static",
// "sh.distrib", "busybox.static"). Keep the list in docs/trust.md in step.
func Interpreter(bin string) bool {
	name := strings.ToLower(filepath.Base(strings.ReplaceAll(bin, `\`, "/")))
	name = strings.TrimSuffix(name, ".exe")
	if loader(name) {
		return true
	}
	if i := strings.IndexAny(name, "-."); i > 0 && shell(name[:i]) {
		return true
	}
	name = strings.TrimRight(name, "0123456789.-_")
	if shell(name) {
		return true
	}
	switch name {
	case
		// language interpreters and their REPLs
		"python", "pythonw", "py", "pypy", "ipython", "node", "nodejs", "deno", "bun", "tsx", "ts-node", "npx", "bunx",
		"npm", "pnpm", "yarn", "perl", "ruby", "irb", "php", "lua", "luajit", "tclsh", "wish", "expect", "rscript", "r",
		"julia", "guile", "racket", "sbcl", "clisp", "ghci", "runghc", "osascript", "jxa", "wscript", "cscript", "mshta",
		"groovy", "java", "jshell", "scala", "kotlin", "dotnet", "gawk", "awk", "mawk", "nawk", "sed", "gsed", "gdb",
		"lldb", "vi", "vim", "nvim", "ex", "ed", "emacs", "make", "uv", "uvx", "pipx",
		// runners of other programs
		"env", "xargs", "exec", "nice", "ionice", "chrt", "taskset", "setarch", "prlimit", "nohup", "timeout", "setsid",
		"stdbuf", "time", "watch", "sudo", "doas", "pkexec", "su", "sg", "runuser", "chroot", "unshare", "nsenter",
		"bwrap", "firejail", "fakeroot", "flock", "script", "rlwrap", "tmux", "screen", "parallel", "strace", "ltrace",
		"xvfb-run", "dbus-run-session", "flatpak-spawn", "open", "xdg-open", "start", "launchctl", "systemd-run", "ssh",
		"docker", "podman", "kubectl":
		return true
	}
	return false
}

// shell reports whether name (lower-case, no suffix) is a command shell or
// a multi-call binary holding one.
func shell(name string) bool {
	switch name {
	case "sh", "ash", "bash", "rbash", "dash", "posh", "zsh", "ksh", "mksh", "oksh", "pdksh", "osh", "csh", "tcsh",
		"fish", "nu", "elvish", "xonsh", "rc", "es", "yash", "busybox", "toybox", "cmd", "powershell", "pwsh":
		return true
	}
	return false
}

// loader reports whether name is the dynamic loader, which runs the
// program named by its first argument ("ld-linux-x86-64.so.2", "ld.so",
// "ld-musl-x86_64.so.1").
func loader(name string) bool {
	return name == "ld.so" || strings.HasPrefix(name, "ld-") && strings.Contains(name, ".so")
}

// routeDecl is the part of a declaration's route the gateway reads for
// itself; the transports read (and check) the rest.
type routeDecl struct {
	Bin          string
	Args         []string
	Method       string
	PathTemplate string
	Path         string
	Provider     string
	Tool         string
	Secret       *plexus.ExtensionSecretRef
}

// routeKeys are the keys each transport reads from a route, spelled as it
// spells them (transports/*: parseRoute; transports/ipc: route). A route
// is read here key by key, exactly, as cliexec reads it, so that what the
// owner is shown, and what the verbs are derived from, is what runs.
func routeKeys(t plexus.TransportKind) []string {
	switch t {
	case plexus.TransportCLI:
		return []string{"bin", "args", "secret", "timeoutMs"}
	case plexus.TransportStdio:
		return []string{"bin", "args", "method", "secret", "timeoutMs"}
	case plexus.TransportLocalREST:
		return []string{"method", "pathTemplate", "path", "secret", "timeoutMs", "scheme"}
	case plexus.TransportIPC:
		return []string{"provider", "tool"}
	}
	return nil
}

// RouteKeyError is a route the gateway cannot read as its transport reads
// it: a key of the wrong type, or a key that differs from one the
// transport reads only by case. Transports disagree there (one reads exact
// keys, another matches any case, and the last duplicate wins), so such a
// route could run another program than the one shown.
type RouteKeyError struct {
	Key     string // as the route spells it
	Problem string
}

func (e *RouteKeyError) Error() string { return "route." + e.Key + ": " + e.Problem }

// readRoute reads the keys transport t reads from raw, each by its exact
// name. A route that is absent reads as empty; one that cannot be read as
// the transport reads it is a [*RouteKeyError] (or a JSON error).
func readRoute(t plexus.TransportKind, raw json.RawMessage) (routeDecl, error) {
	var r routeDecl
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return r, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return routeDecl{}, fmt.Errorf("the route is not a JSON object: %w", err)
	}
	known := routeKeys(t)
	for _, k := range slices.Sorted(maps.Keys(keys)) { // sorted: the same route names the same key
		if i := slices.IndexFunc(known, func(n string) bool { return n != k && strings.EqualFold(n, k) }); i >= 0 {
			return routeDecl{}, &RouteKeyError{Key: k, Problem: fmt.Sprintf("differs from %q only by case", known[i])}
		}
	}
	fields := map[string]any{"bin": &r.Bin, "args": &r.Args, "method": &r.Method, "pathTemplate": &r.PathTemplate,
		"path": &r.Path, "provider": &r.Provider, "tool": &r.Tool, "secret": &r.Secret,
		// read by the transport only; their type is checked all the same
		"timeoutMs": new(float64), "scheme": new(string)}
	for _, k := range known {
		v, ok := keys[k]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		if err := json.Unmarshal(v, fields[k]); err != nil {
			return routeDecl{}, &RouteKeyError{Key: k, Problem: "is not " + typeOf(k) + ", as the transport reads it"}
		}
	}
	return r, nil
}

func typeOf(key string) string {
	switch key {
	case "args":
		return "a list of strings"
	case "secret":
		return "an object {name, attach, as}"
	case "timeoutMs":
		return "a number of milliseconds"
	}
	return "a string"
}

// LeastVerbs is what a cli or stdio capability requires, whatever its
// author declared: execute (on top of the declared verbs) when its program
// or a fixed argument is an [Interpreter], when its argv template lets call
// input choose the program or an option, or when its route cannot be read
// as its transport reads it; the declared verbs otherwise. why says, in a
// sentence for the owner, why execute was added ("" when nothing was).
// Execute is never standing, so each such call is confirmed by the owner.
func LeastVerbs(t plexus.TransportKind, route json.RawMessage, declared []plexus.Verb) (verbs []plexus.Verb, why string) {
	return leastVerbs(t, route, declared, nil)
}

// leastVerbs is [LeastVerbs] that also judges the file the program resolves
// to, following symbolic links, when resolve is not nil: a name that is no
// interpreter ("editor") may be a link to one ("/bin/sh").
func leastVerbs(t plexus.TransportKind, route json.RawMessage, declared []plexus.Verb, resolve Resolver) (verbs []plexus.Verb, why string) {
	verbs = plexus.NormalizeVerbs(declared)
	if t != plexus.TransportCLI && t != plexus.TransportStdio {
		return verbs, ""
	}
	if r, err := readRoute(t, route); err != nil {
		// What would run cannot be known, so it is treated as anything.
		why = "its route could not be read as the transport reads it (" + err.Error() + ")"
	} else {
		why = executeReason(t, r, resolve)
	}
	if why == "" || slices.Contains(verbs, plexus.VerbExecute) {
		return verbs, why
	}
	return plexus.NormalizeVerbs(append(verbs, plexus.VerbExecute)), why
}

func executeReason(t plexus.TransportKind, r routeDecl, resolve Resolver) string {
	switch {
	case strings.ContainsAny(r.Bin, "{}"):
		return fmt.Sprintf("its program %q is a template: call input would choose the program", r.Bin)
	case r.Bin != "" && Interpreter(r.Bin):
		return fmt.Sprintf("%s is a shell, an interpreter or a runner of other programs: what it is handed runs as code", filepath.Base(r.Bin))
	}
	if target := linkTarget(r.Bin, resolve); target != "" && Interpreter(target) {
		return fmt.Sprintf("%s is a link to %s, a shell, an interpreter or a runner of other programs: what it is handed runs as code", filepath.Base(r.Bin), target)
	}
	for i, a := range r.Args {
		// find -exec sh, rsync --rsh=bash, git -c core.pager=sh: a fixed
		// argument naming an interpreter is handed something to run.
		if name, ok := argInterpreter(a); ok {
			return fmt.Sprintf("its argument %d (%q) names %s, a shell, an interpreter or a runner of other programs: what it is handed runs as code", i+1, a, name)
		}
	}
	if t != plexus.TransportCLI {
		return ""
	}
	for i, a := range r.Args {
		if optionPlaceholder(a) {
			return fmt.Sprintf("its argument %d (%q) lets call input choose an option of the program", i+1, a)
		}
		if i > 0 && execOption(r.Args[i-1]) && placeholderLed(a) {
			return fmt.Sprintf("its argument %d (%q) is the value of %q, which names what the program runs: call input would choose it", i+1, a, r.Args[i-1])
		}
	}
	if i := dashDashValue(r.Args); i >= 0 {
		return fmt.Sprintf("its argument %d (\"--\") follows the option %q and may be its value rather than the end of options, yet it lets later call input start with \"-\": call input could choose an option", i+1, r.Args[i-1])
	}
	return ""
}

// argInterpreter reports the [Interpreter] a route argument names, as
// itself or as the value after "=". A bare word that is also an everyday
// subcommand ("start", "watch", "time", "exec" …: [commonWord]) counts only
// as a path ("/usr/bin/time"), so that `myservice start` stays what it
// declares; a shell or a language interpreter counts by name alone.
func argInterpreter(a string) (string, bool) {
	for _, c := range []string{a, a[strings.IndexByte(a, '=')+1:]} {
		if c == "" || !Interpreter(c) {
			continue
		}
		if !strings.ContainsAny(c, `/\`) && commonWord(strings.ToLower(c)) {
			continue
		}
		return filepath.Base(c), true
	}
	return "", false
}

// commonWord reports whether a runner's name is also a word programs take
// as a subcommand or an operand.
func commonWord(w string) bool {
	switch w {
	case "time", "start", "open", "watch", "script", "exec", "make", "r", "ed", "ex", "rc", "es", "nu", "cmd",
		"su", "sg", "expect", "wish", "screen", "parallel", "flock", "env", "timeout", "nice", "nohup", "run":
		return true
	}
	return false
}

// execOption reports whether a literal argument is an option whose value is
// a program or a command line to run (find -exec, rsync --rsh, git -c's
// core.pager …): a placeholder right after it lets call input choose what
// runs.
func execOption(a string) bool {
	switch a {
	case "-exec", "-execdir", "-ok", "-okdir", "--exec", "--rsh", "--rsync-path", "--command", "--shell",
		"--editor", "--pager", "--use-compress-program", "--to-command", "--checkpoint-action", "-c":
		return true
	}
	return false
}

// dashDashValue is the index of the literal "--" that the cli transport
// takes as the end of options (the first) when it directly follows a
// literal option without "=" ("-f", "--file") and a placeholder-led
// argument comes after it; -1 otherwise. That "--" may be the option's
// value, and then input after it can still be read as an option.
func dashDashValue(args []string) int {
	i := slices.Index(args, "--")
	if i <= 0 {
		return -1
	}
	prev := args[i-1]
	if !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") || hasPlaceholder(prev) {
		return -1
	}
	if !slices.ContainsFunc(args[i+1:], placeholderLed) {
		return -1
	}
	return i
}

// hasPlaceholder reports whether a template argument holds a placeholder
// ("{{" and "}}" are literal braces).
func hasPlaceholder(a string) bool {
	return strings.Contains(strings.NewReplacer("{{", "", "}}", "").Replace(a), "{")
}

// placeholderLed reports whether a template argument starts with a
// placeholder: call input then decides its first character.
func placeholderLed(a string) bool {
	return strings.HasPrefix(a, "{") && !strings.HasPrefix(a, "{{")
}

// optionPlaceholder reports whether a template argument is dashes followed
// by a placeholder ("-{x}", "--{name}"): the input then picks the option.
func optionPlaceholder(a string) bool {
	rest := strings.TrimLeft(a, "-")
	return len(rest) < len(a) && placeholderLed(rest)
}

// workflowVerbs is what a workflow requires: its declared verbs and, for
// each member, the verbs it runs the member with and everything the member
// itself requires (grants(id); a member workflow's own effective verbs).
func workflowVerbs(declared []plexus.Verb, members []plexus.WorkflowMember, grants func(id string) []plexus.Verb) []plexus.Verb {
	out := slices.Clone(declared)
	for _, m := range members {
		out = append(out, m.Verbs...)
		out = append(out, grants(m.ID)...)
	}
	return plexus.NormalizeVerbs(out)
}

// workflowWhy says why a workflow requires more than its author declared.
func workflowWhy(declared, effective []plexus.Verb) string {
	if plexus.CoversVerbs(plexus.NormalizeVerbs(declared), effective) {
		return ""
	}
	return "its members together require " + verbWords(effective) + ", and granting it grants them"
}

func verbWords(vs []plexus.Verb) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// DeclVerbs is what each declaration of m requires, in m's order, with the
// reason when the gateway requires more than declared. present finds a
// workflow member registered by another source (nil: none); resolve finds
// the programs, so that a link to an interpreter is judged as one (nil: the
// names alone are judged).
func DeclVerbs(m plexus.ExtensionManifest, present func(id string) (plexus.Entry, bool), resolve Resolver) (verbs [][]plexus.Verb, why []string) {
	verbs = make([][]plexus.Verb, len(m.Capabilities))
	why = make([]string, len(m.Capabilities))
	seen := make([]bool, len(m.Capabilities))
	var of func(i int) []plexus.Verb
	of = func(i int) []plexus.Verb {
		if verbs[i] != nil || seen[i] {
			return verbs[i] // seen and unset: a cycle, which the registry refuses
		}
		seen[i] = true
		d := m.Capabilities[i]
		switch d.Kind {
		case plexus.KindWorkflow:
			verbs[i] = workflowVerbs(d.Grants, d.Members, func(id string) []plexus.Verb {
				if j := slices.IndexFunc(m.Capabilities, func(o plexus.ExtensionCapabilityDecl) bool { return EntryID(m.Source, o.Name) == id }); j >= 0 {
					return of(j)
				}
				if present != nil {
					if e, ok := present(id); ok {
						return e.Grants
					}
				}
				return nil
			})
			why[i] = workflowWhy(d.Grants, verbs[i])
		default:
			verbs[i], why[i] = leastVerbs(declTransport(m, d), d.Route, d.Grants, resolve)
		}
		return verbs[i]
	}
	for i := range m.Capabilities {
		of(i)
	}
	return verbs, why
}

func declTransport(m plexus.ExtensionManifest, d plexus.ExtensionCapabilityDecl) plexus.TransportKind {
	if d.Transport != "" {
		return d.Transport
	}
	return m.Transport
}

// Resolver finds the absolute path of the program a route names, as the
// daemon would run it (a bare name on the platform's enriched PATH, an
// absolute path as is). An error means it is not installed.
type Resolver func(bin string) (string, error)

// linkTarget is the file bin resolves to when that differs from the path
// resolve finds (the path is, or passes through, a symbolic link); "" when
// it does not differ, when resolve is nil or when bin cannot be resolved.
func linkTarget(bin string, resolve Resolver) string {
	if bin == "" || resolve == nil {
		return ""
	}
	p, err := resolve(bin)
	if err != nil {
		return ""
	}
	if target := runsFile(bin, resolve); target != p {
		return target
	}
	return ""
}

// runsFile is the file bin runs: resolved, symbolic links followed; "" when
// resolve is nil or bin cannot be resolved.
func runsFile(bin string, resolve Resolver) string {
	if bin == "" || resolve == nil || strings.ContainsAny(bin, "{}") {
		return ""
	}
	p, err := resolve(bin)
	if err != nil {
		return ""
	}
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return target
}

// DeclReach is what declaration i of m reaches, with the verbs it requires
// (verbs, why: see [DeclVerbs]). resolve may be nil: the path is then not
// known and the reach says so.
func DeclReach(m plexus.ExtensionManifest, i int, verbs []plexus.Verb, why string, resolve Resolver) plexus.Reach {
	d := m.Capabilities[i]
	rc := reachOf(declTransport(m, d), plexus.ExtensionRoute{Decl: d.Route, ServiceHint: m.ServiceHint, Secrets: m.Secrets}, d.Members, resolve)
	rc.Declared = plexus.NormalizeVerbs(d.Grants)
	rc.Verbs, rc.Why = verbs, why
	return rc
}

// EntryReach is what a materialized extension entry reaches and requires,
// or nil when e is not an extension's (its route is not a
// [plexus.ExtensionRoute] of a transport the gateway reads).
func EntryReach(e plexus.Entry, resolve Resolver) *plexus.Reach {
	switch e.Transport {
	case plexus.TransportCLI, plexus.TransportStdio, plexus.TransportLocalREST, plexus.TransportIPC, plexus.TransportWorkflow:
	default:
		return nil
	}
	var xr plexus.ExtensionRoute
	if e.Transport != plexus.TransportWorkflow {
		if len(e.Route) == 0 || json.Unmarshal(e.Route, &xr) != nil {
			return nil
		}
		if len(xr.Decl) == 0 && e.Transport == plexus.TransportIPC {
			// A provider's tool (providers.json): its route is {provider, tool} itself.
			xr.Decl = e.Route
		}
		if len(xr.Decl) == 0 {
			return nil
		}
	}
	rc := reachOf(e.Transport, xr, e.Members, resolve)
	rc.Verbs = plexus.NormalizeVerbs(e.Grants)
	if e.Kind == plexus.KindWorkflow {
		if len(e.Members) == 0 {
			return nil
		}
		return &rc
	}
	_, rc.Why = leastVerbs(e.Transport, xr.Decl, e.Grants, resolve)
	return &rc
}

func reachOf(t plexus.TransportKind, xr plexus.ExtensionRoute, members []plexus.WorkflowMember, resolve Resolver) plexus.Reach {
	rc := plexus.Reach{Transport: t}
	r, err := readRoute(t, xr.Decl)
	if err != nil {
		rc.Unknown = "its route could not be read as the transport reads it (" + err.Error() + "): what it would run cannot be known"
		return rc
	}
	if r.Secret != nil && r.Secret.Name != "" {
		rc.Secrets = []string{r.Secret.Name}
	}
	switch t {
	case plexus.TransportCLI, plexus.TransportStdio:
		rc.Bin, rc.Args = r.Bin, r.Args
		if t == plexus.TransportStdio {
			rc.Method = r.Method
		}
		switch {
		case r.Bin == "":
			rc.Unknown = "the route names no program"
		case resolve == nil:
			rc.Unknown = "Plexus could not look up where " + r.Bin + " is installed"
		default:
			p, err := resolve(r.Bin)
			if err != nil {
				rc.Unknown = r.Bin + " is not installed (not found on the daemon's PATH): what it would run cannot be known"
			} else {
				rc.Path = p
				rc.Target = linkTarget(r.Bin, resolve)
			}
		}
	case plexus.TransportLocalREST:
		rc.Method = strings.ToUpper(r.Method)
		if rc.Method == "" {
			rc.Method = "GET"
		}
		path := r.PathTemplate
		if path == "" {
			path = r.Path
		}
		switch h := xr.ServiceHint; {
		case h == nil:
			rc.Unknown = "the manifest names no service (serviceHint): the host cannot be known"
		case h.DefaultPort > 0:
			rc.URL = "http://127.0.0.1:" + strconv.Itoa(h.DefaultPort) + path
		default:
			rc.URL = path
			rc.Unknown = "the manifest names no port for " + h.App + " (serviceHint.defaultPort): the host it would reach cannot be known"
		}
	case plexus.TransportIPC:
		rc.Provider, rc.Tool = r.Provider, r.Tool
		if r.Provider == "" {
			rc.Unknown = "the route names no ipc provider"
		}
	case plexus.TransportWorkflow:
		rc.Members = slices.Clone(members)
	}
	return rc
}
