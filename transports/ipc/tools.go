package ipc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on what one provider may register (§4.2.2: "schema invalid / too
// large").
const (
	// MaxTools is how many tools one provider may have registered at once.
	MaxTools = 256
	// MaxSchemaBytes caps each of a tool's input_schema and output_schema.
	MaxSchemaBytes = 64 << 10
	// MaxDescriptionBytes caps a tool's description.
	MaxDescriptionBytes = 4 << 10
	// maxTags and maxTagBytes bound a tool's tags and capabilities lists.
	maxTags     = 32
	maxTagBytes = 64
)

// Rejection codes of core.tools.registered and core.tools.unregistered
// (§4.2.2 names the reasons, not the codes; these are Plexus's, in the
// spec's tool.* namespace).
const (
	// CodeToolInvalidID: tool_id is not "<provider_id>/<tool_name>" for
	// this session's provider, the tool name breaks the name rule, or name
	// disagrees with tool_id.
	CodeToolInvalidID = "tool.invalid_id"
	// CodeToolInvalidSchema: input_schema is missing, or a schema is not a
	// JSON Schema 2020-12 that compiles without fetching anything.
	CodeToolInvalidSchema = "tool.invalid_schema"
	// CodeToolTooLarge: a schema, the description or a list is over its
	// limit.
	CodeToolTooLarge = "tool.too_large"
	// CodeToolDuplicate: the tool is listed twice in one message, or is
	// already registered and the message does not replace.
	CodeToolDuplicate = "tool.duplicate"
	// CodeToolLimit: the provider would have more than [MaxTools] tools.
	CodeToolLimit = "tool.limit"
	// CodeToolUnknown: agent.tools.unregister names a tool that is not
	// registered.
	CodeToolUnknown = "tool.unknown"
)

// toolNamePattern is the rule for the <tool_name> part of a tool_id: 1 to
// 64 of A-Z, a-z, 0-9, '.', '_' and '-', starting and ending with a letter
// or digit. It keeps entry ids readable and free of '/'.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`)

// toolDef is a registered tool: the declaration as the provider sent it
// (schemas verbatim) and what Plexus derived from it.
type toolDef struct {
	Tool
	verbs []plexus.Verb
}

// ToolVerbs is the permission verb set an ipc tool requires: execute when
// it requires a directive (execute is approved per use, never standing,
// which is the closest Plexus has to a directive), write when it declares
// side effects, read otherwise.
func ToolVerbs(t Tool) []plexus.Verb {
	switch {
	case t.RequiresDirective:
		return []plexus.Verb{plexus.VerbExecute}
	case t.SideEffects:
		return []plexus.Verb{plexus.VerbWrite}
	}
	return []plexus.Verb{plexus.VerbRead}
}

// checkTool validates one declared tool for provider. It returns the tool
// with Name filled in from tool_id when the provider left it empty, or the
// rejection.
func checkTool(provider string, t Tool) (toolDef, *Error) {
	reject := func(code, format string, args ...any) (toolDef, *Error) {
		return toolDef{}, &Error{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	prefix, name, ok := strings.Cut(t.ToolID, "/")
	switch {
	case !ok:
		return reject(CodeToolInvalidID, "tool_id must be namespaced <agent_id>/<tool_name>")
	case prefix != provider:
		return reject(CodeToolInvalidID, "tool_id must start with this provider's id %q and a slash", provider)
	case !toolNamePattern.MatchString(name):
		return reject(CodeToolInvalidID, "tool name must be 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-', starting and ending with a letter or digit")
	case t.Name != "" && t.Name != name:
		return reject(CodeToolInvalidID, "name %q is not the tool_id's tool name", clip(t.Name))
	}
	t.Name = name
	switch {
	case len(t.Description) > MaxDescriptionBytes:
		return reject(CodeToolTooLarge, "description is %d bytes, over %d", len(t.Description), MaxDescriptionBytes)
	case len(t.InputSchema) > MaxSchemaBytes:
		return reject(CodeToolTooLarge, "input_schema is %d bytes, over %d", len(t.InputSchema), MaxSchemaBytes)
	case len(t.OutputSchema) > MaxSchemaBytes:
		return reject(CodeToolTooLarge, "output_schema is %d bytes, over %d", len(t.OutputSchema), MaxSchemaBytes)
	case len(t.Tags) > maxTags || len(t.Capabilities) > maxTags:
		return reject(CodeToolTooLarge, "at most %d tags and %d capabilities", maxTags, maxTags)
	}
	for _, list := range [][]string{t.Tags, t.Capabilities} {
		for _, s := range list {
			if len(s) > maxTagBytes {
				return reject(CodeToolTooLarge, "a tag or capability is over %d bytes", maxTagBytes)
			}
		}
	}
	if isAbsent(t.InputSchema) {
		return reject(CodeToolInvalidSchema, "input_schema is missing")
	}
	if msg := compileSchema(t.InputSchema); msg != "" {
		return reject(CodeToolInvalidSchema, "input_schema: %s", msg)
	}
	if isAbsent(t.OutputSchema) {
		t.OutputSchema = nil
	} else if msg := compileSchema(t.OutputSchema); msg != "" {
		return reject(CodeToolInvalidSchema, "output_schema: %s", msg)
	}
	return toolDef{Tool: t, verbs: ToolVerbs(t)}, nil
}

// compileSchema returns "" when raw is a JSON Schema 2020-12 object that
// compiles, and the problem otherwise. Nothing is fetched: a $ref outside
// the schema is an error, never a read of a file or a URL. The problem
// quotes no schema text beyond what the compiler names (a keyword path).
func compileSchema(raw json.RawMessage) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "not JSON"
	}
	if _, ok := doc.(map[string]any); !ok {
		return "a schema is a JSON object"
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "plexus:ipc-tool-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return "not a valid JSON Schema: " + clip(oneLine(err.Error()))
	}
	if _, err := c.Compile(loc); err != nil {
		return "not a valid JSON Schema 2020-12: " + clip(oneLine(err.Error()))
	}
	return ""
}

// noLoader refuses to load anything: a provider's schema may not make the
// gateway read a file or fetch a URL.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schemas are not fetched; keep references inside the schema", url)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// route is what an ipc entry's Route holds: which provider and tool to
// call. Plexus writes it; only this transport reads it.
type route struct {
	Provider string `json:"provider"`
	Tool     string `json:"tool"`
}

// entry is the capability entry of tool t of provider (see the package doc
// for the mapping).
func (t toolDef) entry(provider, agentVersion string) plexus.Entry {
	describe := t.Description
	if strings.TrimSpace(describe) == "" {
		describe = "Tool " + t.ToolID + " of the ipc provider " + provider + "."
	}
	io := &plexus.IOSchema{Input: bytes.Clone(t.InputSchema)}
	if len(t.OutputSchema) > 0 {
		io.Output = bytes.Clone(t.OutputSchema)
	}
	extras := map[string]any{"toolId": t.ToolID, "provider": provider}
	if t.SideEffects {
		extras["sideEffects"] = true
	}
	if t.RequiresDirective {
		extras["requiresDirective"] = true
	}
	if len(t.Tags) > 0 {
		extras["tags"] = t.Tags
	}
	if len(t.Capabilities) > 0 {
		extras["capabilities"] = t.Capabilities
	}
	rt, _ := json.Marshal(route{Provider: provider, Tool: t.Name})
	return plexus.Entry{
		ID:         EntryID(provider, t.Name),
		Source:     SourceID(provider),
		Kind:       plexus.KindCapability,
		Label:      t.Name,
		Describe:   describe,
		IO:         io,
		Grants:     t.verbs,
		Transport:  plexus.TransportIPC,
		Provenance: plexus.ProvenanceManaged,
		Version:    agentVersion,
		Extras:     extras,
		Route:      rt,
	}
}

// sameTool reports whether a and b declare the same tool, byte for byte.
func sameTool(a, b *toolDef) bool {
	ja, _ := json.Marshal(a.Tool)
	jb, _ := json.Marshal(b.Tool)
	return bytes.Equal(ja, jb)
}
