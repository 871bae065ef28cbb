package plexus

// ValidEnvName reports whether s is a portable environment variable name,
// [A-Za-z_][A-Za-z0-9_]*: the rule every transport that hands a child
// process variables (cli, stdio, mcp) checks names against.
func ValidEnvName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
