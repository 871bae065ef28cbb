package console

import "testing"

func TestBodySections(t *testing.T) {
	b := []byte("---\nplexus: decision/1\n---\n\n# `claude` asks\n\nline\n\n## What Plexus says\n\n- one\n\n## The agent says\n\n> hi\n\n## How to decide\n\n- move\n")
	title, secs := bodySections(b)
	if title != "`claude` asks" || len(secs) != 2 || secs[0].Title != "What Plexus says" || secs[0].Agent ||
		!secs[1].Agent || secs[1].Lines[0] != "> hi" {
		t.Errorf("bodySections = %q, %+v", title, secs)
	}
}
