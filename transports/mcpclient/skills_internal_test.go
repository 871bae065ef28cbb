package mcpclient

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const okDigest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseSkill(t *testing.T) {
	res := func(items ...string) string { return `"resources":[` + strings.Join(items, ",") + `]` }
	file := func(uri string) string { return `{"uri":"` + uri + `","digest":"` + okDigest + `","size":3}` }
	fm := `"frontmatter":{"name":"x","description":"d"}`
	for _, tc := range []struct {
		name, raw, err string
	}{
		{"OK", `{"uri":"skill://a/x/SKILL.md",` + fm + `,` + res(file("skill://a/x/SKILL.md"), file("skill://a/x/refs/B.md")) + `}`, ""},
		{"NotSKILLmd", `{"uri":"skill://a/x/README.md",` + fm + `,` + res(file("skill://a/x/README.md")) + `}`, "does not end in /SKILL.md"},
		{"NoName", `{"uri":"skill://x/SKILL.md","frontmatter":{"description":"d"},` + res(file("skill://x/SKILL.md")) + `}`, "no name"},
		{"NoResources", `{"uri":"skill://x/SKILL.md",` + fm + `}`, "lists no resources"},
		{"Outside", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://y/SKILL.md")) + `}`, "not within"},
		{"DotDot", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/../y/SKILL.md")) + `}`, "not within"},
		{"Backslash", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file(`skill://x/..\\..\\y`)) + `}`, "not within"},
		{"BackslashSegment", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file(`skill://x/refs\\B.md`)) + `}`, "not within"},
		{"PercentDots", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/%2e%2e/y")) + `}`, "not within"},
		{"PercentSlash", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/a%2Fb")) + `}`, "not within"},
		{"Percent", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/100%.md")) + `}`, "not within"},
		{"EmptySegment", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/a//b")) + `}`, "not within"},
		{"DotSegment", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/./b")) + `}`, "not within"},
		{"TrailingSlash", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/refs/")) + `}`, "not within"},
		{"Twice", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/SKILL.md"), file("skill://x/SKILL.md")) + `}`, "twice"},
		{"NoSKILLmdFile", `{"uri":"skill://x/SKILL.md",` + fm + `,` + res(file("skill://x/B.md")) + `}`, "do not list its SKILL.md"},
		{"BadDigest", `{"uri":"skill://x/SKILL.md",` + fm + `,"resources":[{"uri":"skill://x/SKILL.md","digest":"sha256:ABC"}]}`, "digest"},
		{"BadSize", `{"uri":"skill://x/SKILL.md",` + fm + `,"resources":[{"uri":"skill://x/SKILL.md","digest":"` + okDigest + `","size":-1}]}`, "size"},
		{"NoSize", `{"uri":"skill://x/SKILL.md",` + fm + `,"resources":[{"uri":"skill://x/SKILL.md","digest":"` + okDigest + `"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk, err := parseSkill(json.RawMessage(tc.raw))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if sk.name != "x" || sk.lookup("SKILL.md") == nil {
					t.Errorf("skill %+v", sk)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("got %v, want an error holding %q", err, tc.err)
			}
		})
	}
}

func TestFrontmatterDiff(t *testing.T) {
	want := map[string]any{"name": "x", "description": "d", "metadata": map[string]any{"version": 2.1, "tags": []any{"a", "b"}}}
	for _, tc := range []struct {
		name, body string
		diff       []string
		extra      int
		err        bool
	}{
		{"Same", "---\nname: x\ndescription: d\nmetadata:\n  tags: [a, b]\n  version: 2.1\n---\nbody\n", nil, 0, false},
		{"Changed", "---\nname: x\ndescription: e\nmetadata:\n  tags: [a, b]\n  version: 2.1\n---\n", []string{"description"}, 0, false},
		{"Nested", "---\nname: x\ndescription: d\nmetadata:\n  tags: [b, a]\n  version: 2.1\n---\n", []string{"metadata"}, 0, false},
		{"Extra", "---\nname: x\ndescription: d\nlicense: MIT\nmetadata: {version: 2.1, tags: [a, b]}\n---\n", nil, 1, false},
		{"Missing", "---\nname: x\nmetadata: {version: 2.1, tags: [a, b]}\n---\n", []string{"description"}, 0, false},
		{"None", "no frontmatter\n", nil, 0, true},
		{"NotYAML", "---\nname: [x\n---\n", nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff, extra, err := frontmatterDiff([]byte(tc.body), want)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if !slices.Equal(diff, tc.diff) || extra != tc.extra {
				t.Errorf("diff %v and %d extra, want %v and %d", diff, extra, tc.diff, tc.extra)
			}
		})
	}
}

// TestRefusalBindsEntry: a refusal holds for the listed entry it was made
// under, not for another entry of the same skill URI (a load that failed
// on a listing since replaced).
func TestRefusalBindsEntry(t *testing.T) {
	entry := func(digest string) *skill {
		sk, err := parseSkill(json.RawMessage(`{"uri":"skill://x/SKILL.md","frontmatter":{"name":"x"},"resources":[{"uri":"skill://x/SKILL.md","digest":"` + digest + `"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return sk
	}
	old, listed := entry(okDigest), entry("sha256:"+strings.Repeat("f", 64))
	c := &Client{}
	c.refuse(old, "tampered")
	if got := c.refusal(old); got != "tampered" {
		t.Errorf("refusal of the refused entry %q", got)
	}
	if got := c.refusal(listed); got != "" {
		t.Errorf("a newer entry of the skill is refused: %q", got)
	}
}
