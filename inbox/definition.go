package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/plexus-gw/plexus"
)

// maxShownJSON caps each before/after block of a changed definition: the
// pending decision keeps both whole (the journal only their hashes), and
// the console shows them whole; the file is for reading.
const maxShownJSON = 6000

// definition writes what changed in an ingested definition, top-level field
// by field, each side as indented JSON in a fenced block. Everything here is
// the server's text: it only ever appears inside a fence longer than any
// backtick run it holds, with control and bidi characters escaped, so it
// cannot become markdown.
func (w body) definition(c plexus.DefinitionChange) {
	w.para(fmt.Sprintf("Approving serves %s again, as the server defines it now: agents see the new definition in "+
		"their manifest, and calling it still needs a grant. Denying keeps it held out of every manifest while the "+
		"server serves this definition.", code(c.EntryID)),
		"", fmt.Sprintf("The source %s (%s %s) changed these fields since you added it or last approved it:",
			code(c.Source), md(oneLine(c.Primitive)), code(c.Name)))
	var old, cur map[string]json.RawMessage
	_ = json.Unmarshal(c.Old, &old) // a definition that is not an object shows as wholly changed
	_ = json.Unmarshal(c.New, &cur)
	keys := make([]string, 0, len(old)+len(cur))
	for k := range old {
		keys = append(keys, k)
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	shown := 0
	for _, k := range keys {
		a, inOld := old[k]
		b, inNew := cur[k]
		if inOld && inNew && sameJSON(a, b) {
			continue
		}
		shown++
		lines := []string{"### " + code(k), ""}
		if inOld {
			lines = append(lines, "Before:", "")
			lines = append(lines, fenced(a)...)
		} else {
			lines = append(lines, "Before: (absent)")
		}
		lines = append(lines, "")
		if inNew {
			lines = append(lines, "Now:", "")
			lines = append(lines, fenced(b)...)
		} else {
			lines = append(lines, "Now: (removed)")
		}
		w.para(lines...)
	}
	if shown == 0 {
		// Not an object, or only spacing or key order moved the hash: show
		// both wholes.
		lines := []string{"### The whole definition", "", "Before:", ""}
		lines = append(lines, fenced(c.Old)...)
		lines = append(lines, "", "Now:", "")
		lines = append(lines, fenced(c.New)...)
		w.para(lines...)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// fenced renders raw JSON indented inside a code fence.
func fenced(raw json.RawMessage) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	s := strings.ToValidUTF8(buf.String(), "\uFFFD")
	if len(s) > maxShownJSON {
		s = strings.ToValidUTF8(s[:maxShownJSON], "") + "\n… (cut here; the console shows the whole definition, which approving pins)"
	}
	// Control and format characters (bidi overrides among them) could
	// disguise the text: show them as JSON escapes.
	var b strings.Builder
	for _, r := range s {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	s = b.String()
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	out := []string{fence + "json"}
	out = append(out, strings.Split(s, "\n")...)
	return append(out, fence)
}
