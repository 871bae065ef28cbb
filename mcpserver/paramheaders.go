package mcpserver

import (
	"bytes"
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
	methodHeader      = "Mcp-Method"
	nameHeader        = "Mcp-Name"
	base64Prefix      = "=?base64?"
	base64Suffix      = "?="
	// maxSafeInteger bounds the integers a header value carries exactly.
	maxSafeInteger = 1<<53 - 1
)

// paramHeaders answers, on w, a sessionless tools/call whose Mcp-Param
// headers disagree with its arguments: 400 and HeaderMismatch (-32020),
// and nothing runs. It reports whether it answered.
//
// Only a call of a tool with bindings costs anything: the tool is found by
// the Mcp-Method and Mcp-Name headers, whose agreement with the body the
// SDK checks after this (a request they misname is refused there, and
// nothing runs), and the catalog holds each tool's bindings; only then is
// the body read, and it must name the same method and tool.
func (s *Server) paramHeaders(w http.ResponseWriter, r *http.Request, l *link) bool {
	if r.Method != http.MethodPost || r.Header.Get(methodHeader) != "tools/call" {
		return false
	}
	name := r.Header.Get(nameHeader)
	c, err := s.catalog(r.Context(), l)
	if err != nil || !c.headerBound {
		return false // the call answers why
	}
	bs := c.bindings(name)
	if len(bs) == 0 {
		return false
	}
	body, ref := s.peek(r)
	if ref != nil || int64(len(body)) > s.opts.MaxBodyBytes {
		return false // the SDK refuses it
	}
	var call struct {
		Method string `json:"method"`
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &call) != nil || call.Method != "tools/call" || call.Params.Name != name {
		return false // the SDK refuses it, or the call answers that its params are invalid
	}
	if err := checkParamHeaders(r.Header, call.Params.Arguments, bs); err != nil {
		s.headerMismatch(w, body, err)
		return true
	}
	return false
}

// headerMismatch answers the call in body 400 with HeaderMismatch.
func (s *Server) headerMismatch(w http.ResponseWriter, body []byte, mismatch error) {
	resp := &jsonrpc.Response{Error: &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: mismatch.Error()}}
	if msg, err := jsonrpc.DecodeMessage(body); err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok {
			resp.ID = req.ID
		}
	}
	out, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, mismatch.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	if _, werr := w.Write(out); werr != nil {
		s.log.Debug("mcp: write a header mismatch", "err", werr)
	}
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

// headerAnnotation is how an input schema that binds a header says so.
var headerAnnotation = []byte(`"x-mcp-header"`)

// bindings are the annotated properties of an input schema, nested ones
// included; none, without decoding, for a schema that never says
// x-mcp-header.
func bindings(schema json.RawMessage) []paramBinding {
	var root headerProp
	if !bytes.Contains(schema, headerAnnotation) || json.Unmarshal(schema, &root) != nil {
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
func checkParamHeaders(header http.Header, args map[string]json.RawMessage, bs []paramBinding) error {
	for _, b := range bs {
		name := paramHeaderPrefix + b.header
		got := strings.TrimSpace(header.Get(name))
		arg, ok := lookupArg(args, b.path)
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
