package mcphost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Candidate is a server another MCP host configures, offered to mcp.json
// (`plexus mcp import`).
type Candidate struct {
	Name string
	// Entry is the server as an mcp.json entry; Problem, when not "", says
	// why the host's entry cannot be one.
	Entry   json.RawMessage
	Problem string
	// Ignored are the host's keys the entry does not carry over.
	Ignored []string
}

// Imported is what [File.Import] did.
type Imported struct {
	Lines []string // what to tell the owner, one server a line
	Added int
	// Left names the candidates that are not in mcp.json as the host has
	// them, quoted: the host must keep them.
	Left []string
}

// Import puts each candidate into f by mcp.json's own rules: never over a
// server of the same name, never one that breaks a rule. Names are quoted
// in what it says: they come from a file Plexus did not write. f is not
// saved.
func (f *File) Import(cands []Candidate) Imported {
	var res Imported
	plain := false
	for _, c := range cands {
		skip := func(format string, a ...any) {
			res.Lines = append(res.Lines, fmt.Sprintf("%q: not imported: ", c.Name)+fmt.Sprintf(format, a...))
			res.Left = append(res.Left, fmt.Sprintf("%q", c.Name))
		}
		if c.Problem != "" {
			skip("%s", c.Problem)
			continue
		}
		if have, ok := f.Entry(c.Name); ok {
			if sameJSON(have, c.Entry) {
				res.Lines = append(res.Lines, fmt.Sprintf("%q: already in mcp.json", c.Name))
			} else {
				skip("mcp.json already has a server of that name (left as it is)")
			}
			continue
		}
		s, err := ParseServer(f.Path(), c.Name, c.Entry)
		if err != nil {
			skip("%v", err)
			continue
		}
		f.Put(c.Name, c.Entry)
		res.Added++
		line := fmt.Sprintf("%q: imported", c.Name)
		if len(c.Ignored) > 0 {
			line += fmt.Sprintf(" (not carried over: %s)", strings.Join(c.Ignored, ", "))
		}
		res.Lines = append(res.Lines, line)
		plain = plain || len(s.Env)+len(s.Headers) > 0
	}
	if plain {
		res.Lines = append(res.Lines, "env and header values were copied as written (mcp.json is 0600). To keep one as a secret: "+
			"plexus secrets set NAME, then write ${secret:NAME} in its place.")
	}
	return res
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
