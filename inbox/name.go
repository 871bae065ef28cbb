package inbox

import (
	"path/filepath"
	"strings"
)

// IDPrefix leads every decision id; the rest is a ULID (auth.NewID).
const IDPrefix = "pend_"

// Ext is the extension of a decision file: the file of decision id is
// id + Ext.
const Ext = ".md"

// crockford is the ULID alphabet (Crockford's base32, upper case).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ValidID reports whether id is a decision id: "pend_" and a 26-character
// upper-case ULID. Only such ids become file names, so an id can never carry
// a path separator, a dot-dot or a character a file system mangles.
func ValidID(id string) bool {
	u, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(u) != 26 || u[0] > '7' { // a ULID's first character encodes at most 3 bits
		return false
	}
	for i := range len(u) {
		if strings.IndexByte(crockford, u[i]) < 0 {
			return false
		}
	}
	return true
}

// FileName is the name of decision id's file: "<id>.md".
func FileName(id string) string { return id + Ext }

// IDFromName returns the decision id a file name stands for, and false when
// name is not a decision file (a note of the owner's, a scratch file, a file
// named by hand). Only the base name counts.
func IDFromName(name string) (string, bool) {
	id, ok := strings.CutSuffix(filepath.Base(name), Ext)
	if !ok || !ValidID(id) {
		return "", false
	}
	return id, true
}
