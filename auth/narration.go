package auth

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-gw/plexus"
)

// Narration limits, in runes.
const (
	MaxPurpose          = 280
	MaxNotificationLine = 120
	maxAgentLabel       = 64
	maxEntryLabel       = 80
	// minPurposeInLine is the least purpose worth quoting in a notification
	// line; below it the purpose is left out rather than shown as "…".
	minPurposeInLine = 8
)

// RevokeHint is the command every narration names for undoing an approval.
const RevokeHint = "`plexus grants revoke`"

// Narrate writes the gateway-authored narration of a pending capability, so
// every agent relays the same truthful words instead of its own (§4d).
//
// Summary reads e.g. "Approving lets claude WRITE portal.notes.write (Write a
// file in the notes folder) for up to 1 day; revoke anytime with `plexus
// grants revoke`." NotificationLine is the ≤120-rune tray form
// "{agent} wants to {VERBS} {label} — “{purpose}”", the purpose truncated
// first. Any execute verb narrates "for this one use only" and reports a
// once window, whatever window was passed: execute is never standing.
//
// The agent label, the entry label and the purpose are stripped of control
// and bidi-override characters, since extension manifests and agents author
// them. The purpose appears only in the notification line, quoted; the
// summary is entirely the gateway's.
func Narrate(entry plexus.Entry, verbs []plexus.Verb, agentLabel, purpose string, window plexus.TrustWindow) plexus.PendingNarration {
	vs := requestVerbs(verbs)
	prov := ProvenanceOf(entry)
	if slices.Contains(vs, plexus.VerbExecute) || !ValidWindow(window) {
		window = plexus.TrustWindow{Kind: plexus.WindowOnce}
	}
	agent := capRunes(cleanText(agentLabel), maxAgentLabel)
	if agent == "" {
		agent = "an agent"
	}
	id := cleanText(entry.ID)
	label := capRunes(cleanText(entry.Label), maxEntryLabel)
	if entry.Provenance == plexus.ProvenanceExtension {
		// An agent registered it: its label is the agent's words, which the
		// owner reads apart from the gateway's, never as the gateway's.
		label = ""
	}
	verbWords := verbPhrase(vs)

	subject := id
	if label != "" {
		subject = id + " (" + label + ")"
	}
	summary := fmt.Sprintf("Approving lets %s %s %s %s; revoke anytime with %s.",
		agent, verbWords, subject, windowPhrase(window), RevokeHint)

	shown := label
	if shown == "" {
		shown = id
	}
	return plexus.PendingNarration{
		ID:                 entry.ID,
		Verbs:              vs,
		Provenance:         prov,
		Sensitivity:        Sensitivity(prov, entry.Transport, vs),
		DefaultTrustWindow: window,
		Summary:            summary,
		NotificationLine:   notificationLine(agent+" wants to "+verbWords+" "+shown, CleanPurpose(purpose)),
	}
}

func notificationLine(head, purpose string) string {
	const lq, rq = " — “", "”"
	room := MaxNotificationLine - utf8.RuneCountInString(head) - utf8.RuneCountInString(lq+rq)
	if purpose == "" || room < minPurposeInLine {
		return capRunes(head, MaxNotificationLine)
	}
	return head + lq + capRunes(purpose, room) + rq
}

func verbPhrase(vs []plexus.Verb) string {
	words := make([]string, len(vs))
	for i, v := range vs {
		words[i] = strings.ToUpper(string(v))
	}
	return strings.Join(words, " and ")
}

func windowPhrase(w plexus.TrustWindow) string {
	switch w.Kind {
	case plexus.WindowUntilRevoked:
		return "until you revoke it"
	case plexus.WindowOnce:
		return "for this one use only"
	}
	return "for up to " + humanDuration(WindowDuration(w))
}

// humanDuration spells d in days, hours and minutes, rounding up to the
// minute so a window is never narrated shorter than it is.
func humanDuration(d time.Duration) string {
	mins := int64((d + time.Minute - 1) / time.Minute)
	parts := []struct {
		n    int64
		unit string
	}{{mins / (24 * 60), "day"}, {mins / 60 % 24, "hour"}, {mins % 60, "minute"}}
	var out []string
	for _, p := range parts {
		switch {
		case p.n == 1:
			out = append(out, "1 "+p.unit)
		case p.n > 1:
			out = append(out, fmt.Sprintf("%d %ss", p.n, p.unit))
		}
	}
	if len(out) == 0 {
		return "1 minute"
	}
	return strings.Join(out, " ")
}

// CleanPurpose makes an agent's free-text purpose safe to show a person:
// invalid UTF-8, control characters and bidi overrides removed, runs of
// whitespace collapsed to one space, and the result capped at [MaxPurpose]
// runes (ending in "…" when cut). The purpose influences no decision.
func CleanPurpose(s string) string {
	return capRunes(cleanText(s), MaxPurpose)
}

// cleanText drops invalid UTF-8 and characters that can hide or reorder
// text on a terminal or in a notification, and collapses whitespace.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsControl(r), isBidiControl(r):
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

func isBidiControl(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f' ||
		('\u202a' <= r && r <= '\u202e') || ('\u2066' <= r && r <= '\u2069')
}

// capRunes cuts s to at most n runes, the last being "…" when cut.
func capRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}
