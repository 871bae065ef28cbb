package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/plexus-gw/plexus"
)

// The primitives, as [Definition.Primitive] and the route name them.
// A resource template's entry says "resource" in mcp.primitive (reading it
// is a resources/read) and originName is its uriTemplate.
const (
	PrimitiveTool             = "tool"
	PrimitiveResource         = "resource"
	PrimitiveResourceTemplate = "resourceTemplate"
	PrimitivePrompt           = "prompt"
)

// Definition is one listed primitive, for pinning (the rug-pull defence:
// the owner approved a definition; a changed one is held).
type Definition struct {
	// EntryID is the id of the entry it projects to.
	EntryID string
	// Primitive is "tool", "resource", "resourceTemplate" or "prompt".
	Primitive string
	// Name is the origin name: a tool's or prompt's name, a resource's URI,
	// a template's uriTemplate.
	Name string
	// Hash is the hex sha256 of the canonical definition: the raw JSON
	// object without its top-level "_meta", re-marshalled with sorted keys,
	// no insignificant whitespace, no HTML escaping and numbers as written.
	// Metadata and formatting changes do not change it; anything else does.
	Hash string
	// Raw is the object byte for byte as the server sent it.
	Raw json.RawMessage
}

// route is an entry's transport-private route: what Dispatch needs to make
// the call.
type route struct {
	Primitive string `json:"primitive"`          // tool, resource, resourceTemplate, prompt or skill
	Name      string `json:"name,omitempty"`     // tool or prompt name
	URI       string `json:"uri,omitempty"`      // resource URI; a skill's SKILL.md
	Template  string `json:"template,omitempty"` // resource uriTemplate
}

// listing is what one listing of a server yields, every primitive.
type listing struct {
	protocolVersion string
	tools           []json.RawMessage
	resources       []json.RawMessage
	templates       []json.RawMessage
	prompts         []json.RawMessage
	skills          []json.RawMessage // skills/list entries (skills.go)
	skillsListed    bool              // skills were listed by this listing
}

// projection is a listing turned into entries. defs and entries are in the
// same order and of the same length: defs[i] projects to entries[i].
type projection struct {
	defs    []Definition
	entries []plexus.Entry
}

// objectSchema is io.input of a resource: it takes no input.
var objectSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// project turns l into entries of server name (source id sourceID).
// Objects that cannot be read (no name, not an object), and those whose id
// another primitive of the same server already took, are left out and
// logged.
func project(name, sourceID string, l listing, log *slog.Logger) projection {
	n := len(l.tools) + len(l.resources) + len(l.templates) + len(l.prompts) + len(l.skills)
	p := projector{server: name, source: sourceID, pv: l.protocolVersion, log: log, taken: make(map[string]bool, n),
		out: projection{defs: make([]Definition, 0, n), entries: make([]plexus.Entry, 0, n)}}
	for _, raw := range l.tools {
		p.tool(raw)
	}
	for _, raw := range l.resources {
		p.resource(raw)
	}
	for _, raw := range l.templates {
		p.template(raw)
	}
	for _, raw := range l.prompts {
		p.prompt(raw)
	}
	for _, raw := range l.skills {
		p.skill(raw)
	}
	return p.out
}

type projector struct {
	server, source, pv string
	log                *slog.Logger
	taken              map[string]bool
	out                projection
}

// add appends the entry for raw unless its id is taken.
func (p *projector) add(primitive, origin, id string, raw json.RawMessage, e plexus.Entry, rt route) {
	if p.taken[id] {
		p.log.Warn("mcp: two primitives project to one entry id; the first listed is kept", "server", p.server, "id", id, "primitive", primitive, "name", origin)
		return
	}
	hash, err := canonicalHash(raw)
	if err != nil {
		p.log.Warn("mcp: a listed definition is not a JSON object; left out", "server", p.server, "primitive", primitive, "err", err)
		return
	}
	p.taken[id] = true
	e.ID, e.Source, e.Kind, e.Transport = id, p.source, plexus.KindCapability, plexus.TransportMCP
	mcpPrimitive := primitive
	if primitive == PrimitiveResourceTemplate {
		mcpPrimitive = PrimitiveResource
	}
	e.MCP = &plexus.MCPPassthrough{ServerID: p.server, ProtocolVersion: p.pv, Primitive: mcpPrimitive, OriginName: origin, Raw: raw}
	e.Route, _ = json.Marshal(rt) // strings only: cannot fail
	p.out.entries = append(p.out.entries, e)
	p.out.defs = append(p.out.defs, Definition{EntryID: id, Primitive: primitive, Name: origin, Hash: hash, Raw: raw})
}

// hints are a tool's behaviour annotations; nil means "not said".
type hints struct {
	Title           string `json:"title"`
	ReadOnlyHint    *bool  `json:"readOnlyHint"`
	DestructiveHint *bool  `json:"destructiveHint"`
	OpenWorldHint   *bool  `json:"openWorldHint"`
}

func (p *projector) tool(raw json.RawMessage) {
	t := struct {
		Name         string `json:"name"`
		Title        string `json:"title"`
		Description  string `json:"description"`
		InputSchema  within `json:"inputSchema"`
		OutputSchema within `json:"outputSchema"`
		Annotations  *hints `json:"annotations"`
	}{InputSchema: within{whole: raw}, OutputSchema: within{whole: raw}}
	if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
		p.log.Warn("mcp: a listed tool has no name or is malformed; left out", "server", p.server)
		return
	}
	label := t.Title
	if label == "" && t.Annotations != nil {
		label = t.Annotations.Title
	}
	if label == "" {
		label = t.Name
	}
	e := plexus.Entry{
		Label:    label,
		Describe: describe(t.Description, "tool", t.Name, p.server),
		IO:       &plexus.IOSchema{Input: nonNull(t.InputSchema.val), Output: nonNull(t.OutputSchema.val)},
		Grants:   toolVerbs(t.Annotations),
	}
	p.add(PrimitiveTool, t.Name, "mcp."+p.server+"."+escapeName(t.Name), raw, e, route{Primitive: PrimitiveTool, Name: t.Name})
}

// within is a JSON value of whole kept as a subslice of it, not a copy: a
// tool's schemas are most of its bytes, and the raw tool is kept anyway
// (entry and definition). Neither may be written to, so the subslice's
// capacity ends where the value does.
type within struct {
	whole, val json.RawMessage
}

// UnmarshalJSON finds b in whole: any occurrence will do, being the same
// bytes. It copies b only if whole does not hold it (never, when whole is
// what is being unmarshalled).
func (w *within) UnmarshalJSON(b []byte) error {
	if i := bytes.Index(w.whole, b); i >= 0 {
		w.val = w.whole[i : i+len(b) : i+len(b)]
		return nil
	}
	w.val = bytes.Clone(b)
	return nil
}

// toolVerbs is the grant a tool requires, from its explicit annotations
// only: readOnlyHint true is read; otherwise destructiveHint true or
// openWorldHint true is execute; anything else, an unannotated tool
// included, is write. (The MCP defaults, destructive and open-world, would
// make every unannotated tool execute, which can never be a standing grant
// and so would be asked for at every call; write is what an unknown
// effect is, and the owner sees the verb in every decision.)
func toolVerbs(h *hints) []plexus.Verb {
	switch {
	case h == nil:
		return []plexus.Verb{plexus.VerbWrite}
	case isTrue(h.ReadOnlyHint):
		return []plexus.Verb{plexus.VerbRead}
	case isTrue(h.DestructiveHint) || isTrue(h.OpenWorldHint):
		return []plexus.Verb{plexus.VerbExecute}
	}
	return []plexus.Verb{plexus.VerbWrite}
}

func isTrue(b *bool) bool { return b != nil && *b }

func (p *projector) resource(raw json.RawMessage) {
	var r struct {
		URI         string `json:"uri"`
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.URI == "" {
		p.log.Warn("mcp: a listed resource has no uri or is malformed; left out", "server", p.server)
		return
	}
	e := plexus.Entry{
		Label:    firstOf(r.Title, r.Name, r.URI),
		Describe: describe(r.Description, "resource", r.URI, p.server),
		IO:       &plexus.IOSchema{Input: objectSchema},
		Grants:   []plexus.Verb{plexus.VerbRead},
	}
	p.add(PrimitiveResource, r.URI, p.uniqueID("resource", firstOf(r.Name, r.URI), r.URI), raw, e, route{Primitive: PrimitiveResource, URI: r.URI})
}

func (p *projector) template(raw json.RawMessage) {
	var r struct {
		URITemplate string `json:"uriTemplate"`
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.URITemplate == "" {
		p.log.Warn("mcp: a listed resource template has no uriTemplate or is malformed; left out", "server", p.server)
		return
	}
	tmpl, err := parseTemplate(r.URITemplate)
	if err != nil {
		p.log.Info("mcp: a resource template is left out", "server", p.server, "template", r.URITemplate, "why", err.Error())
		return
	}
	e := plexus.Entry{
		Label:    firstOf(r.Title, r.Name, r.URITemplate),
		Describe: describe(r.Description, "resource template", r.URITemplate, p.server),
		IO:       &plexus.IOSchema{Input: tmpl.schema()},
		Grants:   []plexus.Verb{plexus.VerbRead},
	}
	p.add(PrimitiveResourceTemplate, r.URITemplate, p.uniqueID("template", firstOf(r.Name, r.URITemplate), r.URITemplate), raw, e,
		route{Primitive: PrimitiveResourceTemplate, Template: r.URITemplate})
}

// uniqueID is mcp.<server>.<kind>.<name>, or, when another resource (or
// template) of the server already has that id, the same with "~" and the
// first 8 hex digits of the sha256 of uri appended: resource names need
// not be unique, URIs are.
func (p *projector) uniqueID(kind, name, uri string) string {
	id := "mcp." + p.server + "." + kind + "." + escapeName(name)
	if !p.taken[id] {
		return id
	}
	sum := sha256.Sum256([]byte(uri))
	return id + "~" + hex.EncodeToString(sum[:4])
}

func (p *projector) prompt(raw json.RawMessage) {
	var r struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Arguments   []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Required    bool   `json:"required"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Name == "" {
		p.log.Warn("mcp: a listed prompt has no name or is malformed; left out", "server", p.server)
		return
	}
	props := map[string]any{}
	required := []string{}
	for _, a := range r.Arguments {
		prop := map[string]any{"type": "string"}
		if a.Description != "" {
			prop["description"] = a.Description
		}
		props[a.Name] = prop
		if a.Required {
			required = append(required, a.Name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	input, err := marshalNoEscape(schema) // map keys sort: deterministic
	if err != nil {
		return
	}
	e := plexus.Entry{
		Label:    firstOf(r.Title, r.Name),
		Describe: describe(r.Description, "prompt", r.Name, p.server),
		IO:       &plexus.IOSchema{Input: input},
		Grants:   []plexus.Verb{plexus.VerbRead},
	}
	p.add(PrimitivePrompt, r.Name, "mcp."+p.server+".prompt."+escapeName(r.Name), raw, e, route{Primitive: PrimitivePrompt, Name: r.Name})
}

// describe is the server's description, or, when it gave none, a line
// saying what the entry is.
func describe(desc, what, name, server string) string {
	if strings.TrimSpace(desc) != "" {
		return desc
	}
	return fmt.Sprintf("The %s %s of the MCP server %s (it gives no description).", what, name, server)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// nonNull returns raw, or nil when it is absent or JSON null.
func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// escapeName makes an origin name safe as the last part of an entry id:
// ASCII letters, digits, '_', '-' and '.' stay; every other byte of its
// UTF-8 (a space, '/', ':', '~', non-ASCII) becomes '~' and two upper-case
// hex digits. The mapping is one-to-one, so distinct names keep distinct
// ids.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "~%02X", c)
	}
	return b.String()
}

// marshalNoEscape is json.Marshal without HTML escaping and without the
// trailing newline of an Encoder.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
