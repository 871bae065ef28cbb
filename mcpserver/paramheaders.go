package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SEP-2243: a 2026-07-28 host mirrors each tools/call argument whose
// property in the tool's input schema has an "x-mcp-header" annotation
// into an Mcp-Param-<name> header, so that what sits between host and
// server can route on it; the server checks that header and body agree.
// The SDK checks them against the tools registered with it, which the
// front door's are not (it answers tools/call itself), so the front door
// makes the same check, by the same rules, against the tool as it showed
// it to the host (the upstream's input schema, verbatim).
const (
	paramHeaderPrefix = "Mcp-Param-"
	base64Prefix      = "=?base64?"
	base64Suffix      = "?="
	// maxSafeInteger bounds the integers a header value carries exactly.
	maxSafeInteger = 1<<53 - 1
)

// paramHeaders answers, on w, a sessionless tools/call whose Mcp-Param
// headers disagree with its arguments: 400 and HeaderMismatch (-32020),
// and nothing runs. It reports whether it answered.
func (s *Server) paramHeaders(w http.ResponseWriter, r *http.Request, l *link) bool {
	if r.Method != http.MethodPost {
		return false
	}
	body, ref := s.peek(r)
	if ref != nil || int64(len(body)) > s.opts.MaxBodyBytes {
		return false // the SDK refuses it
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || req.Method != "tools/call" {
		return false
	}
	tool := s.shownTool(r.Context(), l, req.Params)
	if tool == nil {
		return false // the call answers why
	}
	if err := checkParamHeaders(r.Header, req.Params, tool); err != nil {
		out, eerr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: err.Error()}})
		if eerr != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		if _, werr := w.Write(out); werr != nil {
			s.log.Debug("mcp: write a header mismatch", "err", werr)
		}
		return true
	}
	return false
}

// shownTool is the tool a tools/call's params name in the link's view,
// as the host was shown it, or nil.
func (s *Server) shownTool(ctx context.Context, l *link, params json.RawMessage) *mcp.Tool {
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	c, err := s.catalog(ctx, l)
	if err != nil || c.search {
		return nil
	}
	for _, t := range c.tools {
		if t.tool.Name == p.Name {
			return t.tool
		}
	}
	return nil
}

// headerProp is what a schema property says of x-mcp-header.
type headerProp struct {
	Header     json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]headerProp `json:"properties"`
}

// paramBinding is one annotated property: its path in the arguments and
// its header's name.
type paramBinding struct {
	path   []string
	header string
}

// bindings are the tool's annotated properties, nested ones included.
func bindings(tool *mcp.Tool) []paramBinding {
	raw, err := json.Marshal(tool.InputSchema)
	var root headerProp
	if err != nil || json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var out []paramBinding
	var walk func(props map[string]headerProp, prefix []string)
	walk = func(props map[string]headerProp, prefix []string) {
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			var h string
			if json.Unmarshal(p.Header, &h) == nil && h != "" {
				out = append(out, paramBinding{path: path, header: h})
			}
			walk(p.Properties, path)
		}
	}
	walk(root.Properties, nil)
	return out
}

// checkParamHeaders says how header and the call's arguments disagree on
// a bound parameter, or nil: a value present in one and not the other, a
// header that is not valid Base64 where it says it is, or two values that
// differ.
func checkParamHeaders(header http.Header, params json.RawMessage, tool *mcp.Tool) error {
	bs := bindings(tool)
	if len(bs) == 0 {
		return nil
	}
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil // the call answers that its params are invalid
	}
	for _, b := range bs {
		name := paramHeaderPrefix + b.header
		got := strings.TrimSpace(header.Get(name))
		arg, ok := lookupArg(p.Arguments, b.path)
		if !ok || string(arg) == "null" {
			if got != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent or null parameter %q", name, strings.Join(b.path, "."))
			}
			continue
		}
		if got == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %q", name, strings.Join(b.path, "."))
		}
		decoded, ok := decodeHeaderValue(got)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", name)
		}
		if !sameValue(decoded, arg) {
			return fmt.Errorf("header mismatch: %s header does not match the body's %q", name, strings.Join(b.path, "."))
		}
	}
	return nil
}

func lookupArg(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		var obj map[string]json.RawMessage
		if !ok || json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[part]
	}
	return cur, ok
}

// decodeHeaderValue is v with its =?base64?…?= wrapping decoded; false when
// the wrapped text is not Base64.
func decodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, base64Prefix); ok {
		if enc, ok = strings.CutSuffix(enc, base64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			return string(b), err == nil
		}
	}
	return v, true
}

// sameValue reports whether a header's (decoded) value is the argument
// arg: a string as is, a boolean as true or false, an integer in decimal
// (within the safe range); any other argument never matches.
func sameValue(h string, arg json.RawMessage) bool {
	var v any
	if json.Unmarshal(arg, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case string:
		return h == v
	case bool:
		return h == strconv.FormatBool(v)
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > maxSafeInteger {
			return false
		}
		n, err := strconv.ParseFloat(h, 64)
		return err == nil && n == v
	}
	return false
}
