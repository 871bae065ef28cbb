package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxToolName is the longest tool name model APIs accept.
const MaxToolName = 64

// hashLen is the number of hex digits of an id's sha256 in a hashed name:
// 48 bits, so two ids whose readable prefixes agree cannot be made to share
// a name by trial.
const hashLen = 12

// ToolName is the MCP tool name of the capability id: a string matching
// ^[a-zA-Z0-9_-]{1,64}$ that depends on id alone, so a source added or
// removed never renames another source's tool, and a restart changes
// nothing.
//
// An id whose dot-separated segments are non-empty, hold only ASCII letters,
// digits, '-' and '_', neither start nor end with '_' and hold no "__" is
// shown readably, each '.' as "__" ("mcp.github.get_issue" →
// "mcp__github__get_issue"), when that fits in 64 characters. Such a name
// never holds "___", and splitting it at "__" gives the id back, so two such
// ids never share a name. Any other id (another character, an empty
// segment, too long) is shown as its readable prefix (each '.' as "__",
// every other character a name may not hold as '_') cut to 49 characters,
// then "___" and the first 12 hex digits of the sha256 of the id: such a
// name always ends in "___" and those digits, so it never equals a readable
// one, and two such names are equal only if their ids' hashes agree.
func ToolName(id string) string {
	if name, ok := readableName(id); ok {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	prefix := sanitize(id)
	if max := MaxToolName - 3 - hashLen; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + "___" + hex.EncodeToString(sum[:])[:hashLen]
}

// readableName is id with each '.' as "__", when id qualifies for it (see
// [ToolName]).
func readableName(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	for _, seg := range strings.Split(id, ".") {
		if seg == "" || seg[0] == '_' || seg[len(seg)-1] == '_' || strings.Contains(seg, "__") {
			return "", false
		}
		for i := 0; i < len(seg); i++ {
			if !nameByte(seg[i]) {
				return "", false
			}
		}
	}
	name := strings.ReplaceAll(id, ".", "__")
	return name, len(name) <= MaxToolName
}

// sanitize writes each '.' of s as "__" and replaces every other
// character a tool name may not hold (a non-ASCII rune counts as one) with
// '_'.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '.':
			b.WriteString("__")
		case r < 0x80 && nameByte(byte(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
