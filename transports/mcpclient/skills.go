package mcpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/adrg/frontmatter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"gopkg.in/yaml.v3"
)

// The MCP skills extension (SEP-2640, io.modelcontextprotocol/skills).
//
// A server that declares the extension lists its skills with skills/list:
// each entry is the URI of the skill's SKILL.md, its frontmatter as JSON,
// and every file of the skill with the sha256 digest (and, where given,
// the size) of its bytes. Each skill becomes an entry of primitive
// "skill"; listing reads no file of it (the extension forbids fetching a
// skill's files ahead of need). Invoking the entry loads the skill: a
// resources/read of its SKILL.md, or of the one file the input names,
// verified against the listed entry before anything is returned, and
// returned rebuilt from the verified bytes alone (the answer must be one
// content item, for the URI read). A file
// that fails (size, digest, or SKILL.md's frontmatter against the entry's)
// refuses the skill: its reads are answered from then on without asking
// the server, until the server's skills are listed again.

// PrimitiveSkill is [Definition.Primitive] and mcp.primitive of a skill.
const PrimitiveSkill = "skill"

const (
	extSkills        = "io.modelcontextprotocol/skills"
	methodListSkills = "skills/list"
	skillMD          = "SKILL.md"
)

type listSkillsParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type listSkillsResult struct {
	mcp.ResultBase
	Skills     []json.RawMessage `json:"skills"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// addSkillMethods lets client send skills/list. The SDK refuses only a
// standard method's name, which this is not.
func addSkillMethods(client *mcp.Client) error {
	return mcp.AddSendingCustomMethod[*listSkillsParams, *listSkillsResult](client, methodListSkills)
}

// servesSkills says whether the server declared the skills extension.
func (s *session) servesSkills() bool {
	_, ok := s.caps.Extensions[extSkills]
	return ok
}

// listSkills is every skills/list entry, paged to exhaustion, byte for
// byte. A server that does not know the method has none.
func (s *session) listSkills(ctx context.Context) ([]json.RawMessage, error) {
	items, err := s.pages(ctx, "skills", func(ctx context.Context, cursor string) (any, string, error) {
		r, err := mcp.CallCustomMethod[*listSkillsParams, *listSkillsResult](ctx, s.cs, methodListSkills, &listSkillsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r, r.NextCursor, nil
	})
	return noneIfUnknown(items, err)
}

// skill is one skills/list entry, checked.
type skill struct {
	uri         string            // its SKILL.md
	sum         [sha256.Size]byte // of the listed entry's bytes: which listing refused it
	root        string            // uri without "/SKILL.md"
	name        string            // frontmatter.name
	frontmatter map[string]any    // as JSON decodes it
	files       []skillFile       // in the listed order
}

// skillFile is one of a skill's files as its entry lists it.
type skillFile struct {
	uri    string
	path   string // relative to the skill's root
	digest [sha256.Size]byte
	size   int64 // -1: not given
}

var digestForm = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// parseSkill reads a skills/list entry. An entry Plexus could not verify
// reads against is an error: no uri ending in /SKILL.md, no frontmatter
// name, no resources (a dynamically generated skill, which the extension
// lets a host decline), a file outside the skill's directory, listed
// twice or with a malformed digest or size, or no file for SKILL.md.
func parseSkill(raw json.RawMessage) (*skill, error) {
	var e struct {
		URI         string         `json:"uri"`
		Frontmatter map[string]any `json:"frontmatter"`
		Resources   *[]struct {
			URI    string       `json:"uri"`
			Digest string       `json:"digest"`
			Size   *json.Number `json:"size"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("not a skill entry: %w", err)
	}
	root, ok := strings.CutSuffix(e.URI, "/"+skillMD)
	if !ok || root == "" {
		return nil, fmt.Errorf("its uri %q does not end in /%s", e.URI, skillMD)
	}
	sk := &skill{uri: e.URI, sum: sha256.Sum256(raw), root: root, frontmatter: e.Frontmatter}
	if sk.name, _ = e.Frontmatter["name"].(string); sk.name == "" {
		return nil, fmt.Errorf("%s: its frontmatter has no name", e.URI)
	}
	if e.Resources == nil || len(*e.Resources) == 0 {
		return nil, fmt.Errorf("%s: it lists no resources, so its files cannot be verified", e.URI)
	}
	seen := map[string]bool{}
	for _, r := range *e.Resources {
		f, err := sk.file(r.URI, r.Digest, r.Size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.URI, err)
		}
		if seen[f.path] {
			return nil, fmt.Errorf("%s: it lists %s twice", e.URI, r.URI)
		}
		seen[f.path] = true
		sk.files = append(sk.files, f)
	}
	if !seen[skillMD] {
		return nil, fmt.Errorf("%s: its resources do not list its %s", e.URI, skillMD)
	}
	return sk, nil
}

// file checks one listed resource of sk.
func (sk *skill) file(uri, digest string, size *json.Number) (skillFile, error) {
	path, ok := strings.CutPrefix(uri, sk.root+"/")
	if !ok || !withinSkill(path) {
		return skillFile{}, fmt.Errorf("the file %q is not within the skill's directory", uri)
	}
	if !digestForm.MatchString(digest) {
		return skillFile{}, fmt.Errorf("the file %s has no sha256:<64 hex digits> digest", uri)
	}
	f := skillFile{uri: uri, path: path, size: -1}
	if _, err := hex.Decode(f.digest[:], []byte(digest[len("sha256:"):])); err != nil {
		return skillFile{}, fmt.Errorf("the file %s: digest: %w", uri, err)
	}
	if size != nil {
		n, err := size.Int64()
		if err != nil || n < 0 {
			return skillFile{}, fmt.Errorf("the file %s has a size that is not a byte count", uri)
		}
		f.size = n
	}
	return f, nil
}

// withinSkill reports whether path, relative to a skill's root, names a
// file below it however a host resolves it: "/"-separated segments, none
// empty, "." or "..", and no backslash or "%" (a separator on Windows, or an
// encoded dot or slash that a host decoding the URI would resolve).
func withinSkill(path string) bool {
	if path == "" || strings.ContainsAny(path, `\%`) {
		return false
	}
	return !slices.ContainsFunc(strings.Split(path, "/"), func(seg string) bool { return seg == "" || seg == "." || seg == ".." })
}

// lookup is the file at path, nil when the entry lists none.
func (sk *skill) lookup(path string) *skillFile {
	for i := range sk.files {
		if sk.files[i].path == path {
			return &sk.files[i]
		}
	}
	return nil
}

// schema is io.input of a skill: an optional file, one of its listed
// paths; none loads SKILL.md.
func (sk *skill) schema() json.RawMessage {
	paths := make([]string, len(sk.files))
	for i, f := range sk.files {
		paths[i] = f.path
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{"file": map[string]any{
			"type": "string", "enum": paths,
			"description": "A file of the skill, by its path relative to the skill's root (as SKILL.md refers to it); without it, the skill's SKILL.md is loaded.",
		}},
		"additionalProperties": false,
	}
	b, err := marshalNoEscape(schema)
	if err != nil {
		return objectSchema // strings only: cannot fail
	}
	return b
}

func (p *projector) skill(raw json.RawMessage) {
	sk, err := parseSkill(raw)
	if err != nil {
		p.log.Warn("mcp: a listed skill is left out", "server", p.server, "why", err.Error())
		return
	}
	desc, _ := sk.frontmatter["description"].(string)
	e := plexus.Entry{
		Label:    sk.name,
		Describe: describe(desc, "skill", sk.name, p.server),
		IO:       &plexus.IOSchema{Input: sk.schema()},
		Grants:   []plexus.Verb{plexus.VerbRead},
	}
	p.add(PrimitiveSkill, sk.uri, p.uniqueID("skill", sk.name, sk.uri), raw, e, route{Primitive: PrimitiveSkill, URI: sk.uri})
}

// skillRead is a call of a skill entry: the skill as its entry lists it
// and the file the call reads.
type skillRead struct {
	entryID string
	sk      *skill
	file    *skillFile
}

// skillRead checks a call of a skill entry before anything is sent: the
// skill not refused, the input naming a listed file or none (SKILL.md).
func (c *Client) skillRead(entry plexus.Entry, input map[string]any) (*skillRead, *plexus.Error) {
	if entry.MCP == nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "the skill entry has no listed definition")
	}
	sk, err := parseSkill(entry.MCP.Raw)
	if err != nil {
		return nil, plexus.Errorf(plexus.CodeTransportError, "the skill entry cannot be read: %v", err)
	}
	if why := c.refusal(sk); why != "" {
		e := plexus.Errorf(plexus.CodeTransportError, "the skill %s of the MCP server %s is refused: %s; it stays refused until the server's skills are listed again", sk.name, c.name, why)
		e.Detail = map[string]any{"verification": "refused", "skill": sk.uri}
		return nil, e
	}
	path := skillMD
	for k, v := range input {
		s, ok := v.(string)
		if k != "file" || !ok {
			return nil, plexus.Errorf(plexus.CodeSchemaValidationFailed, "a skill takes only input.file, a string")
		}
		if s != "" {
			path = s
		}
	}
	f := sk.lookup(path)
	if f == nil {
		// The value is the agent's input: it is not repeated.
		return nil, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.file names no file the skill %s lists; its entry's io.input lists them", sk.name)
	}
	return &skillRead{entryID: entry.ID, sk: sk, file: f}, nil
}

// verified is the answer to a skill read: the file's one content item,
// rebuilt from its verified bytes, if they are what the entry lists, else
// a verification failure holding none of it, the skill then refused. The
// server's answer is never passed on as it came: anything in it beside
// the verified bytes (another item, _meta, a mimeType's parameters) is
// text the agent would read as the skill's without it being checked.
func (c *Client) verified(r *skillRead, res plexus.TransportResult, typed any) plexus.TransportResult {
	if !res.OK {
		return res
	}
	item, check, why := r.verify(typed)
	if why == "" {
		var err error
		if res.MCPResult, err = verifiedResult(item); err != nil {
			check, why = "content", fmt.Sprintf("the verified content of %s cannot be encoded: %v", r.file.uri, err)
		}
	}
	if why != "" {
		c.refuse(r.sk, fmt.Sprintf("%s failed verification (%s)", r.file.uri, check))
		e := plexus.Errorf(plexus.CodeTransportError, "the skill %s of the MCP server %s is not loaded: the %s check failed: %s; the skill is refused until the server's skills are listed again", r.sk.name, c.name, check, why)
		e.Detail = map[string]any{"verification": check, "skill": r.sk.uri, "uri": r.file.uri}
		c.log.Warn("mcp: a skill failed verification and is refused", "entry", r.entryID, "uri", r.file.uri, "check", check)
		return plexus.TransportResult{Error: e}
	}
	res.Data = map[string]any{"server": c.name, "skill": r.sk.uri, "root": r.sk.root, "file": r.file.path, "uri": r.file.uri}
	return res
}

// verify checks the read's content against the file's entry: the content
// item that passed, or which check failed and why. The checks are the
// extension's: a byte length that is not the listed size, bytes whose
// sha256 is not the listed digest, and, for SKILL.md, YAML frontmatter
// that differs from the entry's field by field.
func (r *skillRead) verify(typed any) (item *mcp.ResourceContents, check, why string) {
	item, why = readContent(typed, r.file.uri)
	if why != "" {
		return nil, "content", why
	}
	body := contentBytes(item)
	if r.file.size >= 0 && int64(len(body)) != r.file.size {
		return nil, "size", fmt.Sprintf("%s is %d bytes where the skill's entry lists %d", r.file.uri, len(body), r.file.size)
	}
	if sha256.Sum256(body) != r.file.digest {
		return nil, "digest", fmt.Sprintf("the sha256 of %s is not the digest the skill's entry lists", r.file.uri)
	}
	if r.file.path != skillMD {
		return item, "", ""
	}
	// Unverified text is never repeated (a YAML error quotes it): only the
	// entry's own field names are.
	fields, extra, err := frontmatterDiff(body, r.sk.frontmatter)
	switch {
	case err != nil:
		return nil, "frontmatter", fmt.Sprintf("%s has no YAML frontmatter that parses", r.file.uri)
	case len(fields) > 0 || extra > 0:
		what := strings.Join(fields, ", ")
		if extra > 0 {
			what = strings.TrimPrefix(fmt.Sprintf("%s, %d field(s) the entry does not have", what, extra), ", ")
		}
		return nil, "frontmatter", fmt.Sprintf("the frontmatter of %s differs from the skill's entry in %s", r.file.uri, what)
	}
	return item, "", ""
}

// readContent is the one content item of a resources/read result for
// uri, or why the result is not that: a skill file's answer holds exactly
// one item, for the URI read, its text or its blob (not both), so that
// the bytes verified are all the answer says.
func readContent(typed any, uri string) (*mcp.ResourceContents, string) {
	rr, _ := typed.(*mcp.ReadResourceResult)
	if rr == nil {
		return nil, fmt.Sprintf("the server's answer holds no content for %s", uri)
	}
	if len(rr.Contents) != 1 {
		return nil, fmt.Sprintf("the server's answer holds %d content items where a skill file's holds one, for %s", len(rr.Contents), uri)
	}
	c := rr.Contents[0]
	switch {
	case c == nil || c.URI != uri:
		return nil, fmt.Sprintf("the server's answer holds no content for %s", uri)
	case c.Blob != nil && c.Text != "":
		return nil, fmt.Sprintf("the server's answer for %s holds both text and a blob", uri)
	}
	return c, ""
}

// contentBytes is the bytes of a content item: its blob decoded, or its
// text as UTF-8.
func contentBytes(c *mcp.ResourceContents) []byte {
	if c.Blob != nil {
		return c.Blob
	}
	return []byte(c.Text)
}

// verifiedResult is the resources/read result given to the agent for a
// verified item: its URI, its bytes (as text or blob, as they came), and
// its media type without parameters, when it has one that parses.
func verifiedResult(c *mcp.ResourceContents) (json.RawMessage, error) {
	type item struct {
		URI      string  `json:"uri"`
		MIMEType string  `json:"mimeType,omitempty"`
		Text     *string `json:"text,omitempty"`
		Blob     []byte  `json:"blob,omitempty"`
	}
	it := item{URI: c.URI, Blob: c.Blob}
	if mt, _, err := mime.ParseMediaType(c.MIMEType); err == nil {
		it.MIMEType = mt
	}
	if len(c.Blob) == 0 { // an empty blob is sent as the empty text it equals
		it.Text, it.Blob = &c.Text, nil
	}
	return marshalNoEscape(map[string]any{"contents": []item{it}})
}

var skillYAML = frontmatter.NewFormat("---", "---", yaml.Unmarshal)

// frontmatterDiff parses the YAML frontmatter of a SKILL.md and compares
// it field by field with want's: the fields of want (sorted) that it lacks
// or whose values differ, and how many fields it has that want has not.
// Both sides are compared as JSON values, the form the entry carries them
// in.
func frontmatterDiff(body []byte, want map[string]any) (diff []string, extra int, err error) {
	var got map[string]any
	if _, err := frontmatter.MustParse(bytes.NewReader(body), &got, skillYAML); err != nil {
		return nil, 0, err
	}
	gotJSON, err := asJSON(got)
	if err != nil {
		return nil, 0, fmt.Errorf("a value is not JSON: %w", err)
	}
	wantJSON, err := asJSON(want)
	if err != nil {
		return nil, 0, err
	}
	for _, k := range slices.Sorted(maps.Keys(wantJSON)) {
		if g, ok := gotJSON[k]; !ok || !reflect.DeepEqual(g, wantJSON[k]) {
			diff = append(diff, k)
		}
	}
	for k := range gotJSON {
		if _, ok := wantJSON[k]; !ok {
			extra++
		}
	}
	return diff, extra, nil
}

// asJSON is m through a JSON round trip: numbers float64, maps
// map[string]any, whatever decoder made m.
func asJSON(m map[string]any) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// skillRefusal is a refused skill: the listed entry it was refused under, and
// why.
type skillRefusal struct {
	sum [sha256.Size]byte
	why string
}

// refusal is why sk is refused, "" when it is not. A refusal binds the
// entry it was made under: a call that failed on a listing since replaced
// by another entry does not refuse the new one.
func (c *Client) refusal(sk *skill) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if r, ok := c.refused[sk.uri]; ok && r.sum == sk.sum {
		return r.why
	}
	return ""
}

// refuse refuses sk until the next listing of skills.
func (c *Client) refuse(sk *skill, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused == nil {
		c.refused = map[string]skillRefusal{}
	}
	if r, ok := c.refused[sk.uri]; !ok || r.sum != sk.sum {
		c.refused[sk.uri] = skillRefusal{sum: sk.sum, why: why}
	}
}
