package mcphost

import (
	"encoding/json"
	"fmt"
)

// EditError is an edit of mcp.json refused for the owner to act on;
// nothing was written.
type EditError struct{ Msg string }

func (e *EditError) Error() string { return e.Msg }

// Add writes the server name, raw being its mcp.json entry, into the file
// at path. A server already there under that name is replaced only when
// replace is set; a server that names secrets not stored (missing, the
// first of them reported) is refused.
func Add(path, name string, raw json.RawMessage, replace bool, missing []string) error {
	doc, err := ReadFile(path)
	if err != nil {
		return err
	}
	if _, exists := doc.Entry(name); exists && !replace {
		return &EditError{fmt.Sprintf("%s already has a server %q; pass --replace to replace it", path, name)}
	}
	if len(missing) > 0 {
		return &EditError{fmt.Sprintf("the secret %s is not set; store it first with: plexus secrets set %s", missing[0], missing[0])}
	}
	doc.Put(name, raw)
	return doc.Save()
}

// Remove takes the server name out of the file at path.
func Remove(path, name string) error {
	doc, err := ReadFile(path)
	if err != nil {
		return err
	}
	if !doc.Remove(name) {
		return &EditError{fmt.Sprintf("%s has no server %q (see plexus mcp list)", path, name)}
	}
	return doc.Save()
}
