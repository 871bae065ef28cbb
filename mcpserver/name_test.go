package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := "mcp.server." + strings.Repeat("x", 200)
	tests := []struct {
		name, id, want string
	}{
		{"Readable", "portal.docs.read", "portal__docs__read"},
		{"UnderscoreKept", "mcp.github.get_issue", "mcp__github__get_issue"},
		{"DashKept", "mcp.server-everything.get-env", "mcp__server-everything__get-env"},
		{"NoDot", "echo", "echo"},
		{"Escaped", "mcp.github.get~20weather", "mcp__github__get_20weather___" + hash12("mcp.github.get~20weather")},
		{"Slash", "ext.a/b.c", "ext__a_b__c___" + hash12("ext.a/b.c")},
		{"Unicode", "mcp.wetter.grüße", "mcp__wetter__gr__e___" + hash12("mcp.wetter.grüße")},
		{"EmptySegment", "a..b", ""},
		{"LeadingUnderscore", "mcp.x._private", ""},
		{"DoubleUnderscore", "mcp.x.a__b", ""},
		{"Long", long, "mcp__server__" + strings.Repeat("x", 36) + "___" + hash12(long)},
		{"Empty", "", "___" + hash12("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToolName(tt.id)
			if !toolNamePattern.MatchString(got) {
				t.Fatalf("ToolName(%q) = %q, does not match %s", tt.id, got, toolNamePattern)
			}
			if got != ToolName(tt.id) {
				t.Fatalf("ToolName(%q) is not deterministic", tt.id)
			}
			if _, readable := readableName(tt.id); !readable && !strings.HasSuffix(got, "___"+hash12(tt.id)) {
				t.Errorf("ToolName(%q) = %q, want the hash suffix ___%s", tt.id, got, hash12(tt.id))
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("ToolName(%q) = %q, want %q", tt.id, got, tt.want)
			}
		})
	}
}

// TestToolNameCollisions: ids that sanitize alike, or read alike with '.'
// and '_' swapped, keep distinct names, whatever else is listed.
func TestToolNameCollisions(t *testing.T) {
	groups := [][]string{
		{"a.b", "a_b", "a__b", "a___b", "a.__b", "a_.b", "a._b", "a..b"},
		{"mcp.x.get weather", "mcp.x.get_weather", "mcp.x.get~20weather", "mcp.x.get/weather", "mcp.x.get.weather"},
		{"mcp.x.ü", "mcp.x.ö", "mcp.x.__", "mcp.x.___"},
		{"mcp.s." + strings.Repeat("y", 100) + "1", "mcp.s." + strings.Repeat("y", 100) + "2"},
		// A readable id built to look like another id's hashed name.
		{"mcp.x.get weather", strings.ReplaceAll(ToolName("mcp.x.get weather"), "__", ".")},
	}
	for _, ids := range groups {
		seen := map[string]string{}
		for _, id := range ids {
			n := ToolName(id)
			if other, dup := seen[n]; dup {
				t.Errorf("ToolName(%q) = ToolName(%q) = %q", id, other, n)
			}
			seen[n] = id
		}
	}
}

// hash12 is the first 12 hex digits of the sha256 of id.
func hash12(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:12]
}
