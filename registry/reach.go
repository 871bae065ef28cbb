package registry

// This file holds the gateway's own reading of an extension entry: the
// least verbs it requires whatever its author declared, and what it
// reaches (the program, URL, provider or members), for the owner to see
// before approving.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/plexus-gw/plexus"
)

// Interpreter reports whether bin (a bare name or a path) names a program
// that runs whatever it is handed as code or as another program: a shell, a
// language interpreter, or a runner of other commands. It matches the base
// name, lower-cased, without ".exe" and without a version suffix, so
// "/usr/bin/python3.12", "perl5.36" and "lua5.4" match. Keep the list in
// docs/trust.md in step.
func Interpreter(bin string) bool {
	name := strings.ToLower(filepath.Base(strings.ReplaceAll(bin, `\`, "/")))
	name = strings.TrimSuffix(name, ".exe")
	name = strings.TrimRight(name, "0123456789.-_")
	switch name {
	case
		// shells
		"sh", "ash", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "csh", "tcsh", "fish", "nu", "elvish", "xonsh",
		"rc", "es", "yash", "busybox", "toybox", "cmd", "powershell", "pwsh",
		// language interpreters and their REPLs
		"python", "pythonw", "pypy", "ipython", "node", "nodejs", "deno", "bun", "tsx", "ts-node", "npx", "bunx",
		"perl", "ruby", "irb", "php", "lua", "luajit", "tclsh", "wish", "expect", "rscript", "r", "julia", "guile",
		"racket", "sbcl", "clisp", "ghci", "runghc", "osascript", "jxa", "wscript", "cscript", "mshta", "groovy",
		"jshell", "scala", "kotlin", "dotnet", "gawk", "awk", "mawk", "nawk", "sed", "gsed", "gdb", "lldb",
		"vim", "nvim", "emacs", "make", "uv", "uvx", "pipx",
		// runners of other programs
		"env", "xargs", "exec", "nice", "nohup", "timeout", "setsid", "stdbuf", "time", "watch", "sudo", "doas",
		"su", "runuser", "chroot", "unshare", "nsenter", "flock", "script", "parallel", "strace", "ltrace",
		"open", "xdg-open", "start", "launchctl", "systemd-run", "ssh", "docker", "podman", "kubectl":
		return true
	}
	return false
}

// routeDecl is the part of a declaration's route the gateway reads for
// itself; the transports read (and check) the rest.
type routeDecl struct {
	Bin          string                     `json:"bin"`
	Args         []string                   `json:"args"`
	Method       string                     `json:"method"`
	PathTemplate string                     `json:"pathTemplate"`
	Path         string                     `json:"path"`
	Provider     string                     `json:"provider"`
	Tool         string                     `json:"tool"`
	Secret       *plexus.ExtensionSecretRef `json:"secret"`
}

func readRoute(raw json.RawMessage) routeDecl {
	var r routeDecl
	if len(raw) > 0 {
		// A malformed route is the transport's to refuse; what could be
		// read is what is shown.
		if err := json.Unmarshal(raw, &r); err != nil {
			return routeDecl{}
		}
	}
	return r
}

// LeastVerbs is what a cli or stdio capability requires, whatever its
// author declared: execute (on top of the declared verbs) when its program
// is an [Interpreter], or when its argv template lets call input choose the
// program or an option; the declared verbs otherwise. why says, in a
// sentence for the owner, why execute was added ("" when nothing was).
// Execute is never standing, so each such call is confirmed by the owner.
func LeastVerbs(t plexus.TransportKind, route json.RawMessage, declared []plexus.Verb) (verbs []plexus.Verb, why string) {
	verbs = plexus.NormalizeVerbs(declared)
	if t != plexus.TransportCLI && t != plexus.TransportStdio {
		return verbs, ""
	}
	r := readRoute(route)
	why = executeReason(t, r)
	if why == "" || slices.Contains(verbs, plexus.VerbExecute) {
		return verbs, why
	}
	return plexus.NormalizeVerbs(append(verbs, plexus.VerbExecute)), why
}

func executeReason(t plexus.TransportKind, r routeDecl) string {
	switch {
	case strings.ContainsAny(r.Bin, "{}"):
		return fmt.Sprintf("its program %q is a template: call input would choose the program", r.Bin)
	case r.Bin != "" && Interpreter(r.Bin):
		return fmt.Sprintf("%s is a shell, an interpreter or a runner of other programs: what it is handed runs as code", filepath.Base(r.Bin))
	case t != plexus.TransportCLI:
		return ""
	}
	for i, a := range r.Args {
		if optionPlaceholder(a) {
			return fmt.Sprintf("its argument %d (%q) lets call input choose an option of the program", i+1, a)
		}
	}
	return ""
}

// optionPlaceholder reports whether a template argument is dashes followed
// by a placeholder ("-{x}", "--{name}"): the input then picks the option.
func optionPlaceholder(a string) bool {
	rest := strings.TrimLeft(a, "-")
	return len(rest) < len(a) && strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, "{{")
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
// workflow member registered by another source (nil: none).
func DeclVerbs(m plexus.ExtensionManifest, present func(id string) (plexus.Entry, bool)) (verbs [][]plexus.Verb, why []string) {
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
			verbs[i], why[i] = LeastVerbs(declTransport(m, d), d.Route, d.Grants)
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
	_, rc.Why = LeastVerbs(e.Transport, xr.Decl, e.Grants)
	return &rc
}

func reachOf(t plexus.TransportKind, xr plexus.ExtensionRoute, members []plexus.WorkflowMember, resolve Resolver) plexus.Reach {
	rc := plexus.Reach{Transport: t}
	r := readRoute(xr.Decl)
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
