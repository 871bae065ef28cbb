package inbox

import (
	"strings"
)

// Annotate writes note into b, a file Plexus could not use as it stands
// (one [Parse] refused, or one whose id Plexus does not know), without
// changing anything else the owner wrote: the note goes right after the
// frontmatter, or at the very top when there is no frontmatter to find, as
// the same "> **Plexus could not apply this file:** …" block [Render]
// writes. A note Annotate wrote before is replaced, so annotating again
// does not pile notes up. [Parse] skips a note block at the top, so fixing
// the frontmatter is all the owner has to do.
func Annotate(b []byte, note string) []byte {
	lines := strings.SplitAfter(string(b), "\n")
	lines = dropNotes(lines)
	var block []string
	for _, l := range noteBlock(cleanNote(note)) {
		block = append(block, l+"\n")
	}
	at := 0
	if open := openingLine([]byte(strings.Join(lines, ""))); open > 0 {
		for i := open; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "---" {
				at = i + 1
				break
			}
		}
	}
	if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += "\n"
	}
	rest := lines[at:]
	for len(rest) > 0 && strings.TrimSpace(rest[0]) == "" {
		rest = rest[1:] // one blank line around the note, however often it is replaced
	}
	out := append([]string{}, lines[:at]...)
	if at > 0 {
		out = append(out, "\n")
	}
	out = append(out, block...)
	if len(rest) > 0 {
		out = append(out, "\n")
	}
	out = append(out, rest...)
	return []byte(strings.Join(out, ""))
}

// noteBlock is a cleaned note as a quoted markdown block: the first
// statement after [NoteHeading], any further ones as a list.
func noteBlock(note string) []string {
	if note == "" {
		note = "the file could not be read"
	}
	ls := strings.Split(note, "\n")
	out := []string{"> " + NoteHeading + " " + md(ls[0])}
	if len(ls) > 1 {
		out = append(out, ">")
	}
	for _, l := range ls[1:] {
		out = append(out, "> - "+md(l))
	}
	return out
}

// dropNotes removes note blocks (a line starting "> " + NoteHeading, the
// quoted lines after it, and one blank line that follows) from lines.
func dropNotes(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "> "+NoteHeading) {
			out = append(out, lines[i])
			continue
		}
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], ">") {
			i++
		}
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "" {
			i++
		}
	}
	return out
}

// blankLeadingNote turns a note block at the top of b into blank lines
// (keeping line numbers), so the frontmatter after it is found.
func blankLeadingNote(b []byte) []byte {
	s := string(b)
	i := 0
	for i < len(s) && (s[i] == '\n' || s[i] == '\r' || s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if !strings.HasPrefix(s[i:], "> "+NoteHeading) {
		return b
	}
	out := []byte(s)
	for j := i; j < len(s); {
		end := strings.IndexByte(s[j:], '\n')
		if end < 0 {
			end = len(s) - j
		}
		if !strings.HasPrefix(s[j:], ">") {
			break
		}
		for k := j; k < j+end; k++ {
			out[k] = ' '
		}
		j += end + 1
	}
	return out
}
