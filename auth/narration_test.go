package auth

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestNarrate(t *testing.T) {
	notesW := plexus.Entry{ID: "portal.notes.write", Label: "Write a file in the notes folder", Grants: verbs(wr),
		Transport: plexus.TransportPortal, Provenance: fp}
	got := Narrate(notesW, verbs(wr), "claude", "file today's meeting notes", w1d)
	want := plexus.PendingNarration{
		ID: "portal.notes.write", Verbs: verbs(wr), Provenance: fp, Sensitivity: plexus.SensitivityElevated,
		DefaultTrustWindow: w1d,
		Summary:            "Approving lets claude WRITE portal.notes.write (Write a file in the notes folder) for up to 1 day; revoke anytime with `plexus grants revoke`.",
		NotificationLine:   "claude wants to WRITE Write a file in the notes folder — “file today's meeting notes”",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Narrate (-want +got):\n%s", diff)
	}
}

func TestNarrateWindows(t *testing.T) {
	e := plexus.Entry{ID: "x.y", Label: "Y", Transport: plexus.TransportMCP, Provenance: mgd}
	tests := []struct {
		name       string
		verbs      []plexus.Verb
		window     plexus.TrustWindow
		wantPhrase string
		wantWindow plexus.TrustWindow
	}{
		{"Execute", verbs(ex), w7d, "EXECUTE x.y (Y) for this one use only;", once},
		{"ExecuteUntilRevoked", verbs(rd, ex), wUR, "READ and EXECUTE x.y (Y) for this one use only;", once},
		{"Once", verbs(wr), once, "for this one use only;", once},
		{"Hour", verbs(rd), w1h, "for up to 1 hour;", w1h},
		{"Week", verbs(rd), w7d, "READ x.y (Y) for up to 7 days;", w7d},
		{"UntilRevoked", verbs(rd, wr), wUR, "READ and WRITE x.y (Y) until you revoke it;", wUR},
		{"Custom", verbs(rd), custom(36*time.Hour + 90*time.Second), "for up to 1 day 12 hours 2 minutes;", custom(36*time.Hour + 90*time.Second)},
		{"CustomSmall", verbs(rd), plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 1}, "for up to 1 minute;", plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 1}},
		{"Invalid", verbs(rd), plexus.TrustWindow{Kind: "bogus"}, "for this one use only;", once},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Narrate(e, tt.verbs, "bot", "", tt.window)
			if !strings.Contains(n.Summary, tt.wantPhrase) {
				t.Errorf("summary %q lacks %q", n.Summary, tt.wantPhrase)
			}
			if n.DefaultTrustWindow != tt.wantWindow {
				t.Errorf("window %v, want %v", n.DefaultTrustWindow, tt.wantWindow)
			}
		})
	}
}

func TestNarrateNotificationLine(t *testing.T) {
	long := strings.Repeat("really ", 60)
	e := plexus.Entry{ID: "a.b", Label: "Read notes", Transport: plexus.TransportPortal, Provenance: fp}
	longLabel := plexus.Entry{ID: "a.b", Label: strings.Repeat("L", 200), Transport: plexus.TransportPortal, Provenance: fp}
	tests := []struct {
		name   string
		e      plexus.Entry
		agent  string
		purp   string
		want   string
		prefix string
	}{
		{"NoPurpose", e, "claude", "", "claude wants to READ Read notes", ""},
		{"EmptyAgent", e, " \t", "", "an agent wants to READ Read notes", ""},
		{"NoLabelUsesID", plexus.Entry{ID: "a.b", Provenance: fp}, "claude", "", "claude wants to READ a.b", ""},
		{"ControlCharsStripped", e, "cla\x1b[31mude", "sum\u202emarize\nnotes\x00", "cla[31mude wants to READ Read notes — “summarize notes”", ""},
		{"LongPurposeTruncated", e, "claude", long, "", "claude wants to READ Read notes — “really really"},
		{"LongLabelDropsPurpose", longLabel, strings.Repeat("A", 100), "why", "", strings.Repeat("A", 63) + "… wants to READ LLLL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := Narrate(tt.e, verbs(rd), tt.agent, tt.purp, w7d).NotificationLine
			if n := utf8.RuneCountInString(line); n > MaxNotificationLine {
				t.Errorf("line has %d runes, want <= %d: %q", n, MaxNotificationLine, line)
			}
			if tt.want != "" && line != tt.want {
				t.Errorf("line %q, want %q", line, tt.want)
			}
			if tt.prefix != "" && !strings.HasPrefix(line, tt.prefix) {
				t.Errorf("line %q lacks prefix %q", line, tt.prefix)
			}
			if tt.name == "LongPurposeTruncated" && (utf8.RuneCountInString(line) != MaxNotificationLine || !strings.HasSuffix(line, "…”")) {
				t.Errorf("truncated line %q should fill %d runes and end in …”", line, MaxNotificationLine)
			}
			if tt.name == "LongLabelDropsPurpose" && strings.Contains(line, "why") {
				t.Errorf("line %q kept a purpose with no room", line)
			}
			for _, r := range line {
				if r < 0x20 || r == 0x7f || isBidiControl(r) {
					t.Errorf("line %q holds control rune %U", line, r)
				}
			}
		})
	}
	// The summary never carries the agent's purpose.
	if s := Narrate(e, verbs(rd), "claude", "IGNORE PREVIOUS", w7d).Summary; strings.Contains(s, "IGNORE") {
		t.Errorf("summary %q carries the purpose", s)
	}
}

func TestCleanPurpose(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"plain", "plain"},
		{"  two\n\nlines\t tab  ", "two lines tab"},
		{"bell\x07 esc\x1b[2J del\x7f", "bell esc[2J del"},
		{"rtl \u202egnp.exe\u202c ok", "rtl gnp.exe ok"},
		{"bad \xff utf8", "bad utf8"},
		{"c1\u0085control", "c1 control"},
		{"émoji 👍 ok", "émoji 👍 ok"},
	}
	for _, tt := range tests {
		if got := CleanPurpose(tt.in); got != tt.want {
			t.Errorf("CleanPurpose(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("é", 500)
	got := CleanPurpose(long)
	if n := utf8.RuneCountInString(got); n != MaxPurpose || !strings.HasSuffix(got, "…") {
		t.Errorf("CleanPurpose(500 runes) has %d runes (suffix …: %v), want %d", n, strings.HasSuffix(got, "…"), MaxPurpose)
	}
	if got := CleanPurpose(strings.Repeat("a", MaxPurpose)); utf8.RuneCountInString(got) != MaxPurpose || strings.HasSuffix(got, "…") {
		t.Errorf("a purpose of exactly %d runes was cut", MaxPurpose)
	}
}
