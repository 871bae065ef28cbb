package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-gw/plexus"
)

// ManifestProblem is one rule a manifest breaks: the field at fault, by path
// ("capabilities[1].io.input"), what is wrong, and how to fix it.
type ManifestProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
	Fix     string `json:"fix,omitempty"`
}

func (p ManifestProblem) String() string {
	s := p.Field + ": " + p.Problem
	if p.Fix != "" {
		s += " (" + p.Fix + ")"
	}
	return s
}

// ManifestError lists every problem of an extension manifest, in field
// order, so an author fixes them all in one round.
type ManifestError struct {
	Problems []ManifestProblem
}

func (e *ManifestError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid extension manifest: " + strings.Join(parts, "; ")
}

// Patterns of the ids a manifest names. A source id is lower-case
// letters, digits and ".-_:" (":" becomes "." in entry ids); a declaration
// name is <noun>.<verb>: two or more lower-kebab segments joined by dots.
var (
	sourcePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]{0,63}$`)
	declNamePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$`)
	secretNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// authorTransports are the transports an extension may name (§4): never
// mcp (the gateway's own ingestion path) and never a first-party one.
var authorTransports = []plexus.TransportKind{plexus.TransportLocalREST, plexus.TransportStdio, plexus.TransportIPC,
	plexus.TransportCLI, plexus.TransportSkill, plexus.TransportWorkflow}

// SourceSlug is source with ":" turned into ".": the prefix of every entry
// id the source contributes (the ID-DERIVATION RULE).
func SourceSlug(source string) string { return strings.ReplaceAll(source, ":", ".") }

// EntryID is the id a declaration named name gets in source.
func EntryID(source, name string) string { return SourceSlug(source) + "." + name }

// ValidateManifest checks m against every rule of the extension spec (§8 and
// the §13 checklist) and returns a [*ManifestError] naming each broken one,
// or nil. present looks up an entry already in the gateway, for workflow
// members declared by another source; nil means nothing is known beyond the
// manifest (an author's offline check), and such members are then not
// judged: [Unresolved] lists them.
func ValidateManifest(m plexus.ExtensionManifest, present func(id string) (plexus.Entry, bool)) error {
	v := &manifestCheck{m: m, present: present}
	v.top()
	for i := range m.Capabilities {
		v.decl(i)
	}
	if len(v.problems) == 0 {
		return nil
	}
	return &ManifestError{Problems: v.problems}
}

// Unresolved lists the workflow members of m that neither m declares nor
// present knows, as "capabilities[i].members[j]: id".
func Unresolved(m plexus.ExtensionManifest, present func(id string) (plexus.Entry, bool)) []string {
	var out []string
	for i, d := range m.Capabilities {
		for j, mem := range d.Members {
			if _, ok := declared(m, mem.ID); ok {
				continue
			}
			if present != nil {
				if _, ok := present(mem.ID); ok {
					continue
				}
			}
			out = append(out, fmt.Sprintf("capabilities[%d].members[%d]: %s", i, j, mem.ID))
		}
	}
	return out
}

// declared finds the declaration of m whose entry id is id.
func declared(m plexus.ExtensionManifest, id string) (plexus.ExtensionCapabilityDecl, bool) {
	for _, d := range m.Capabilities {
		if EntryID(m.Source, d.Name) == id {
			return d, true
		}
	}
	return plexus.ExtensionCapabilityDecl{}, false
}

type manifestCheck struct {
	m        plexus.ExtensionManifest
	present  func(string) (plexus.Entry, bool)
	problems []ManifestProblem
}

func (v *manifestCheck) add(field, problem, fix string) {
	v.problems = append(v.problems, ManifestProblem{Field: field, Problem: problem, Fix: fix})
}

func (v *manifestCheck) top() {
	m := v.m
	if m.Manifest != plexus.ManifestVersion {
		v.add("manifest", fmt.Sprintf("%q is not a manifest version this gateway reads", m.Manifest),
			`write "manifest": "`+plexus.ManifestVersion+`"`)
	}
	switch {
	case strings.TrimSpace(m.Source) == "":
		v.add("source", "missing", `name the source, lower-case, e.g. "obsidian" or "mcp:github"`)
	case !sourcePattern.MatchString(m.Source):
		v.add("source", fmt.Sprintf("%q is not a source id", m.Source),
			"use lower-case letters, digits and . _ - : (at most 64), starting with a letter or digit")
	}
	if strings.TrimSpace(m.Label) == "" {
		v.add("label", "missing", `give the source a human-readable label, e.g. "Obsidian (Local REST API)"`)
	}
	v.transport("transport", m.Transport, true)
	if len(m.Capabilities) == 0 {
		v.add("capabilities", "empty: the extension would contribute no entries", "declare at least one capability, skill or workflow")
	}
	seen := map[string]int{}
	for i, s := range m.Secrets {
		f := fmt.Sprintf("secrets[%d]", i)
		switch {
		case !secretNamePattern.MatchString(s.Name):
			v.add(f+".name", fmt.Sprintf("%q is not a secret name", s.Name), "use lower-case letters, digits and . _ - (at most 64)")
		case seen[s.Name] > 0:
			v.add(f+".name", fmt.Sprintf("%q is declared twice (also secrets[%d])", s.Name, seen[s.Name]-1), "declare each secret once")
		default:
			seen[s.Name] = i + 1
		}
		v.attach(f, s.Attach, s.As)
	}
	if h := m.ServiceHint; h != nil {
		if strings.TrimSpace(h.App) == "" {
			v.add("serviceHint.app", "missing", "name the app the service belongs to")
		}
		if h.DefaultPort < 0 || h.DefaultPort > 65535 {
			v.add("serviceHint.defaultPort", fmt.Sprintf("%d is not a TCP port", h.DefaultPort), "use 1–65535")
		}
	}
}

// transport checks a transport name; required says it may not be empty.
func (v *manifestCheck) transport(field string, t plexus.TransportKind, required bool) {
	switch {
	case t == "" && required:
		v.add(field, "missing", "one of local-rest, cli, stdio, ipc, skill, workflow")
	case t == "":
	case t == plexus.TransportMCP:
		v.add(field, "mcp is not an extension transport: MCP servers are ingested from mcp.json", "use local-rest, cli, stdio or ipc, or add the server with plexus mcp add")
	case !slices.Contains(authorTransports, t):
		v.add(field, fmt.Sprintf("%q is not a transport", t), "one of local-rest, cli, stdio, ipc, skill, workflow")
	}
}

func (v *manifestCheck) attach(field, attach, as string) {
	switch attach {
	case "", plexus.AttachBearer, plexus.AttachEnv:
	case plexus.AttachHeader, plexus.AttachQuery:
		if strings.TrimSpace(as) == "" {
			v.add(field+".as", "missing: attach "+attach+" needs the "+attach+" name", `e.g. "as": "X-Api-Key"`)
		}
	default:
		v.add(field+".attach", fmt.Sprintf("%q is not an attach mode", attach), "one of bearer, header, query, env")
	}
}

func (v *manifestCheck) decl(i int) {
	d := v.m.Capabilities[i]
	f := fmt.Sprintf("capabilities[%d]", i)
	switch {
	case d.Name == "":
		v.add(f+".name", "missing", `name it <noun>.<verb>, e.g. "vault.read"`)
	case !declNamePattern.MatchString(d.Name):
		v.add(f+".name", fmt.Sprintf("%q is not a <noun>.<verb> name", d.Name),
			`use lower-case words joined by dots, e.g. "vault.read" or "daily.log"`)
	default:
		for j := range i {
			if v.m.Capabilities[j].Name == d.Name {
				v.add(f+".name", fmt.Sprintf("%q is declared twice (also capabilities[%d]): both would be %s", d.Name, j,
					EntryID(v.m.Source, d.Name)), "give each declaration its own name")
				break
			}
		}
	}
	if strings.TrimSpace(d.Label) == "" {
		v.add(f+".label", "missing", "give a short label an agent and the owner will read")
	}
	if strings.TrimSpace(d.Describe) == "" {
		v.add(f+".describe", "missing", `say the outcome and when to use it: "Action outcome. Use when X."`)
	}
	for j, g := range d.Grants {
		if !g.Valid() {
			v.add(fmt.Sprintf("%s.grants[%d]", f, j), fmt.Sprintf("%q is not a verb", g), "read, write or execute")
		}
	}
	if d.Grants == nil {
		v.add(f+".grants", "missing", `list the verbs the entry requires, e.g. ["read"]; a skill has []`)
	}
	v.transport(f+".transport", d.Transport, false)
	t := d.Transport
	if t == "" {
		t = v.m.Transport
	}
	route := v.route(f, d.Route)
	switch d.Kind {
	case plexus.KindSkill:
		v.skill(f, d, t)
	case plexus.KindWorkflow:
		v.workflow(f, d, t)
	case plexus.KindCapability:
		v.capability(f, d, t)
	case "":
		v.add(f+".kind", "missing", "capability, skill or workflow")
	default:
		v.add(f+".kind", fmt.Sprintf("%q is not a kind", d.Kind), "capability, skill or workflow")
	}
	v.routeRefs(f, route)
	v.routeKeys(f, t, d.Route, route != nil)
}

// routeKeys refuses a route its transport would read otherwise than the
// gateway shows it (see [RouteKeyError]).
func (v *manifestCheck) routeKeys(f string, t plexus.TransportKind, raw json.RawMessage, object bool) {
	if !object {
		return
	}
	var ke *RouteKeyError
	if _, err := readRoute(t, raw); errors.As(err, &ke) && ke.Key != "secret" { // routeRefs names a bad secret
		v.add(f+".route."+ke.Key, ke.Problem, "spell each key exactly as the transport does ("+strings.Join(routeKeys(t), ", ")+") and give it its type")
	}
}

func (v *manifestCheck) skill(f string, d plexus.ExtensionCapabilityDecl, t plexus.TransportKind) {
	if d.Body == nil || (strings.TrimSpace(d.Body.Markdown) == "" && strings.TrimSpace(d.Body.Ref) == "") {
		v.add(f+".body", "missing: a skill carries its usage text", `write "body": {"format": "markdown", "markdown": "…"}`)
	} else if d.Body.Format != "markdown" {
		v.add(f+".body.format", fmt.Sprintf("%q is not a body format", d.Body.Format), `use "markdown"`)
	}
	if len(d.Grants) > 0 {
		v.add(f+".grants", "a skill requires no verbs: it is read as context, never invoked", "write \"grants\": []")
	}
	if t != plexus.TransportSkill {
		v.add(f+".transport", fmt.Sprintf("a skill's transport is skill, not %q", t), `write "transport": "skill"`)
	}
	if d.IO != nil {
		v.add(f+".io", "a skill takes no input and gives no output", "remove io")
	}
	if len(d.Members) > 0 {
		v.add(f+".members", "only a workflow has members", "remove members")
	}
}

func (v *manifestCheck) workflow(f string, d plexus.ExtensionCapabilityDecl, t plexus.TransportKind) {
	if t != plexus.TransportWorkflow {
		v.add(f+".transport", fmt.Sprintf("a workflow's transport is workflow, not %q", t), `write "transport": "workflow"`)
	}
	if len(d.Grants) == 0 {
		v.add(f+".grants", "a workflow requires at least one verb", "list the verbs granting it implies, e.g. [\"write\"]")
	}
	if d.Body != nil {
		v.add(f+".body", "only a skill has a body", "remove body")
	}
	if len(d.Members) == 0 {
		v.add(f+".members", "missing: a workflow composes existing entries", `list them in order: [{"id": "…", "verbs": ["read"]}]`)
	}
	self := EntryID(v.m.Source, d.Name)
	for j, mem := range d.Members {
		mf := fmt.Sprintf("%s.members[%d]", f, j)
		if mem.ID == "" {
			v.add(mf+".id", "missing", "name a full entry id, e.g. notes.vault.read")
			continue
		}
		if mem.ID == self {
			v.add(mf+".id", "a workflow cannot be its own member", "remove it")
			continue
		}
		if len(mem.Verbs) == 0 {
			v.add(mf+".verbs", "missing", "list the verbs the workflow exercises on this member")
		}
		for k, vb := range mem.Verbs {
			if !vb.Valid() {
				v.add(fmt.Sprintf("%s.verbs[%d]", mf, k), fmt.Sprintf("%q is not a verb", vb), "read, write or execute")
			}
		}
		kind, grants, ok := v.member(mem.ID)
		switch {
		case !ok && v.present == nil:
			// Offline: the gateway checks it at registration (Unresolved).
		case !ok:
			v.add(mf+".id", fmt.Sprintf("%s is not an entry of this manifest nor of the gateway", mem.ID),
				"a member must be registered before the workflow; check the id (source slug + name)")
		case kind == plexus.KindSkill:
			v.add(mf+".id", mem.ID+" is a skill, which cannot be invoked", "name a capability or workflow")
		case !plexus.CoversVerbs(grants, mem.Verbs):
			v.add(mf+".verbs", fmt.Sprintf("%v exceed what %s requires (%v)", mem.Verbs, mem.ID, grants),
				"a member's verbs must be among the verbs its entry requires")
		}
	}
}

// member finds a workflow member in the manifest or, failing that, the
// gateway.
func (v *manifestCheck) member(id string) (plexus.EntryKind, []plexus.Verb, bool) {
	if d, ok := declared(v.m, id); ok {
		return d.Kind, d.Grants, true
	}
	if v.present != nil {
		if e, ok := v.present(id); ok {
			return e.Kind, e.Grants, true
		}
	}
	return "", nil, false
}

func (v *manifestCheck) capability(f string, d plexus.ExtensionCapabilityDecl, t plexus.TransportKind) {
	if len(d.Grants) == 0 {
		v.add(f+".grants", "a capability requires at least one verb", `declare the minimum: ["read"] unless it writes or runs something`)
	}
	if t == plexus.TransportSkill || t == plexus.TransportWorkflow {
		v.add(f+".transport", fmt.Sprintf("a capability is reached over a wire, not %q", t), "use local-rest, cli, stdio or ipc")
	}
	if d.Body != nil {
		v.add(f+".body", "only a skill has a body", "remove body")
	}
	if len(d.Members) > 0 {
		v.add(f+".members", "only a workflow has members", "remove members")
	}
	if d.IO != nil {
		v.schema(f+".io.input", d.IO.Input)
		v.schema(f+".io.output", d.IO.Output)
	}
}

// schema checks that raw (when present) compiles as JSON Schema 2020-12.
// Nothing is fetched: a $ref outside the schema is an error, never a read
// of a file or a URL.
func (v *manifestCheck) schema(field string, raw json.RawMessage) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		v.add(field, "not JSON: "+err.Error(), "write the schema as a JSON object")
		return
	}
	if _, ok := doc.(map[string]any); !ok {
		if _, isBool := doc.(bool); !isBool {
			v.add(field, "a schema is a JSON object (or true/false)", `e.g. {"type": "object", "properties": {…}}`)
			return
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "plexus:manifest-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		v.add(field, "not a valid JSON Schema: "+oneLine(err.Error()), "see https://json-schema.org/draft/2020-12")
		return
	}
	if _, err := c.Compile(loc); err != nil {
		sortCauses(err)
		v.add(field, "not a valid JSON Schema 2020-12: "+oneLine(err.Error()), "fix the schema; references must stay inside it")
	}
}

// sortCauses orders the causes of a schema's metaschema failure by their
// text, at every level: the library gathers them in map order, and the same
// manifest must be refused in the same words every time (found by
// FuzzManifest).
func sortCauses(err error) {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		sortValidation(ve)
	}
}

func sortValidation(ve *jsonschema.ValidationError) {
	text := make(map[*jsonschema.ValidationError]string, len(ve.Causes))
	for _, c := range ve.Causes {
		sortValidation(c)
		text[c] = c.Error()
	}
	slices.SortStableFunc(ve.Causes, func(a, b *jsonschema.ValidationError) int { return strings.Compare(text[a], text[b]) })
}

// noLoader refuses to load anything: a manifest's schema may not make the
// gateway read a file or fetch a URL.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schemas are not fetched; keep references inside the schema", url)
}

// route reads a declaration's route as a JSON object (nil when absent).
func (v *manifestCheck) route(f string, raw json.RawMessage) map[string]json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(raw, &r); err != nil {
		v.add(f+".route", "not a JSON object", "route is an object of the transport's keys")
		return nil
	}
	return r
}

// routeRefs checks the route keys that point elsewhere in the manifest:
// the secret a transport attaches, and the skills a capability links.
func (v *manifestCheck) routeRefs(f string, r map[string]json.RawMessage) {
	if raw, ok := r["secret"]; ok {
		var s plexus.ExtensionSecretRef
		if err := json.Unmarshal(raw, &s); err != nil || s.Name == "" {
			v.add(f+".route.secret", "not a secret reference", `write {"name": "…", "attach": "bearer"}`)
		} else {
			if !slices.ContainsFunc(v.m.Secrets, func(d plexus.ExtensionSecretRef) bool { return d.Name == s.Name }) {
				v.add(f+".route.secret.name", fmt.Sprintf("%q is not declared in secrets", s.Name),
					`add {"name": "`+s.Name+`", "attach": "…"} to the manifest's secrets`)
			}
			v.attach(f+".route.secret", s.Attach, s.As)
		}
	}
	if raw, ok := r["attachSkills"]; ok {
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			v.add(f+".route.attachSkills", "not a list of names", `e.g. ["vault.how-to-cite"]`)
			return
		}
		for j, n := range names {
			i := slices.IndexFunc(v.m.Capabilities, func(d plexus.ExtensionCapabilityDecl) bool { return d.Name == n })
			switch {
			case i < 0:
				v.add(fmt.Sprintf("%s.route.attachSkills[%d]", f, j), fmt.Sprintf("%q is not declared in this manifest", n),
					"name a kind:\"skill\" declaration of this manifest")
			case v.m.Capabilities[i].Kind != plexus.KindSkill:
				v.add(fmt.Sprintf("%s.route.attachSkills[%d]", f, j), fmt.Sprintf("%q is a %s, not a skill", n, v.m.Capabilities[i].Kind),
					"only skills can be attached")
			}
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// MaxManifestSize bounds a manifest read from a file or a request.
const MaxManifestSize = 1 << 20

// ReadManifest reads the manifest file at path and decodes it
// ([ParseManifest]).
func ReadManifest(path string) (plexus.ExtensionManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return plexus.ExtensionManifest{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return plexus.ExtensionManifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	return ParseManifest(b)
}

// ParseManifest decodes a manifest's JSON strictly: a key the format does
// not have (a misspelt "capabilites") is a problem naming it, not a field
// silently dropped. It does not validate; see [ValidateManifest].
func ParseManifest(b []byte) (plexus.ExtensionManifest, error) {
	var m plexus.ExtensionManifest
	if len(b) > MaxManifestSize {
		return m, &ManifestError{Problems: []ManifestProblem{{Field: "manifest",
			Problem: fmt.Sprintf("%d bytes; a manifest is at most %d", len(b), MaxManifestSize), Fix: "split the extension"}}}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		field, problem := "manifest", oneLine(strings.TrimPrefix(err.Error(), "json: "))
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field = te.Field
			problem = fmt.Sprintf("want %s, not a JSON %s", te.Type, te.Value)
		} else if k, ok := strings.CutPrefix(problem, "unknown field "); ok {
			field, problem = strings.Trim(k, `"`), "not a manifest field"
			if field == "" {
				// An empty key would leave the problem nameless (found by FuzzManifest).
				field, problem = "manifest", `the empty key "" is not a manifest field`
			}
		}
		return m, &ManifestError{Problems: []ManifestProblem{{Field: field, Problem: problem,
			Fix: "see the fields of plexus-extension/0.1 in docs/extensions.md"}}}
	}
	if dec.More() {
		return m, &ManifestError{Problems: []ManifestProblem{{Field: "manifest", Problem: "more than one JSON value",
			Fix: "a manifest file holds one JSON object"}}}
	}
	return m, nil
}
