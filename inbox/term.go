package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/plexus-gw/plexus"
)

// This file is a decision for a terminal: plexus show, the table of plexus
// pending, and what approve and reject say of the outcome. Like reach.go it
// quotes Go-style and escapes as \uXXXX, where the decision file uses
// Markdown.

// WritePending prints decision p for a person (plexus show): what is asked,
// by whom, the gateway's narration, the agent's own words kept apart, and
// how to decide it or how it was decided.
func WritePending(w io.Writer, p plexus.Pending) {
	writeHeadline(w, p)
	WriteReaches(w, p)
	writeItems(w, p.Items)
	if len(p.Narration) > 0 {
		fmt.Fprintln(w)
		for _, n := range p.Narration {
			fmt.Fprintf(w, "  %s\n", n.Summary)
		}
	}
	if p.Bundle != nil && p.Bundle.Name != "" {
		fmt.Fprintf(w, "\n  task bundle (the agent's name for it): %q\n", p.Bundle.Name)
	}
	writeAgentWords(w, p)
	if c := p.Definition; c != nil {
		writeDefinitionChange(w, *c)
	}
	if s := p.SignIn; s != nil {
		writeSignIn(w, *s)
	}
	writeVerdict(w, p)
}

// writeHeadline is what p is and when it was asked.
func writeHeadline(w io.Writer, p plexus.Pending) {
	if c := p.Definition; c != nil {
		fmt.Fprintf(w, "%s — %s changed the definition of %s, %s\n", p.ID, c.Source, c.EntryID, p.State)
	} else if s := p.SignIn; s != nil {
		fmt.Fprintf(w, "%s — %s asks you to sign in to it, %s\n", p.ID, TermSafe(s.Server), p.State)
	} else {
		fmt.Fprintf(w, "%s — %s request by %s, %s\n", p.ID, kindOr(p.Kind), p.AgentID, p.State)
	}
	fmt.Fprintf(w, "  asked %s, expires %s, trace %s\n", timeString(p.CreatedAt), timeString(p.ExpiresAt), p.TraceID)
}

// writeItems lists each capability asked for, with its window, its
// constraint and a workflow's members.
func writeItems(w io.Writer, items []plexus.PendingItem) {
	if len(items) > 0 {
		fmt.Fprintln(w)
	}
	for _, it := range items {
		fmt.Fprintf(w, "  %s  %s  window %s  %s, %s\n", it.CapabilityID, verbsString(it.Verbs), windowString(&it.TrustWindow),
			it.Provenance, it.Sensitivity)
		if it.Constraint != nil {
			b, _ := json.Marshal(it.Constraint)
			fmt.Fprintf(w, "      only for input matching %s\n", b)
		}
		for _, m := range it.Members {
			fmt.Fprintf(w, "      also runs %s (%s)\n", m.ID, verbsString(m.Verbs))
		}
	}
}

// writeVerdict says how to decide a pending p, or how it was decided.
func writeVerdict(w io.Writer, p plexus.Pending) {
	if p.State == plexus.StatePending {
		window := " [--window …]"
		if p.Definition != nil || p.Extension != nil || p.SignIn != nil {
			window = "" // decided as a whole
		}
		fmt.Fprintf(w, "\nDecide with: plexus approve %s%s | plexus reject %s --reason \"…\"\n", p.ID, window, p.ID)
		return
	}
	decided := ""
	if p.DecidedAt != nil {
		decided = " at " + timeString(*p.DecidedAt)
	}
	fmt.Fprintf(w, "\n%s by %s via %s%s", strings.ToUpper(p.State[:1])+p.State[1:], dash(p.DecidedBy), dash(p.Via), decided)
	if p.Reason != "" {
		fmt.Fprintf(w, ": %s", p.Reason)
	}
	fmt.Fprintln(w)
}

func kindOr(k string) string {
	if k == "" {
		return plexus.PendingGrant
	}
	return k
}

// writeDefinitionChange shows, top-level field by field, what a server
// changed in a definition (the decision file shows each side in full).
func writeDefinitionChange(w io.Writer, c plexus.DefinitionChange) {
	var old, cur map[string]json.RawMessage
	_ = json.Unmarshal(c.Old, &old)
	_ = json.Unmarshal(c.New, &cur)
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	fmt.Fprintf(w, "\n  Changed since you accepted it (sha256 %s → %s):\n", shortHash(c.OldHash), shortHash(c.NewHash))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		a, b := old[k], cur[k]
		if bytes.Equal(compactJSON(a), compactJSON(b)) {
			continue
		}
		fmt.Fprintf(w, "    %s:\n      was: %s\n      now: %s\n", k, clipJSON(a), clipJSON(b))
	}
}

func compactJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

// clipJSON is raw on one line, cut to 200 runes, with control and format
// characters escaped (a server's text must not restyle the terminal).
func clipJSON(raw json.RawMessage) string {
	if raw == nil {
		return "(absent)"
	}
	s := string(compactJSON(raw))
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == 200 {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// writeAgentWords prints, last and marked, the text the agent wrote: its
// purpose and, for a registration, the manifest's labels and descriptions.
func writeAgentWords(w io.Writer, p plexus.Pending) {
	var lines []string
	if p.Purpose != "" {
		lines = append(lines, "purpose: "+strconv.Quote(p.Purpose))
	}
	if m := p.Extension; m != nil {
		lines = append(lines, "extension label: "+strconv.Quote(m.Label))
		for _, d := range m.Capabilities {
			lines = append(lines, extEntryID(m.Source, d.Name)+": "+strconv.Quote(clipLine(d.Label, 120))+" — "+strconv.Quote(clipLine(d.Describe, 300)))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\n  The agent says (its own words, not checked by Plexus):")
	for _, l := range lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

// WritePendingTable prints the decisions waiting for the owner (plexus
// pending), one row each, then how to decide them with the files in
// inboxDir or the commands.
func WritePendingTable(w io.Writer, pending []plexus.Pending, inboxDir string) error {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "ID\tAGENT\tASKS FOR\tWINDOW\tSENSITIVITY\tEXPIRES\tPURPOSE")
	for _, p := range pending {
		asks, windows, sens := asksOf(p)
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, dash(p.AgentID), dash(asks), dash(strings.Join(windows, ", ")),
			dash(string(sens)), timeString(p.ExpiresAt), dash(TermSafe(clipLine(p.Purpose, 60))))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(pending) > 0 {
		fmt.Fprintf(w, "\nEach is a file in %s: move it to ../active/ to approve (edit it first to narrow),\n"+
			"to ../rejected/ to deny, or delete it to withdraw.\n"+
			"Or: plexus show <id> | plexus approve <id> [--window …] | plexus reject <id> --reason \"…\"\n", inboxDir)
	}
	return nil
}

// asksOf is p's row in the pending table: what it asks for (each entry with
// its verbs and, where recorded, what it reaches), the windows in the same
// order, and the highest sensitivity asked.
func asksOf(p plexus.Pending) (string, []string, plexus.Sensitivity) {
	var asks, windows []string
	sens := plexus.Sensitivity("")
	ids, rs := Reaches(p)
	brief := func(id string) string {
		if i := slices.Index(ids, id); i >= 0 && rs[i] != nil {
			return ": " + ReachBrief(*rs[i])
		}
		return ""
	}
	for _, it := range p.Items {
		asks = append(asks, it.CapabilityID+" ("+verbsString(it.Verbs)+brief(it.CapabilityID)+")")
		windows = append(windows, windowString(&it.TrustWindow)) // in the order of asks
		if it.Sensitivity.Rank() > sens.Rank() {
			sens = it.Sensitivity
		}
	}
	prefix := "" // what kind of decision, before the list of what it asks for
	switch {
	case p.Definition != nil:
		asks = []string{"changed definition: " + p.Definition.EntryID}
	case p.SignIn != nil:
		asks = []string{TermSafe(signInAsks(*p.SignIn))}
	case p.Extension != nil:
		prefix, asks = "extension "+p.Extension.Source+": ", nil
		for i, id := range ids {
			if rs[i] == nil {
				asks = append(asks, id+" (reach not recorded)")
				continue
			}
			asks = append(asks, id+" ("+verbsString(rs[i].Verbs)+brief(id)+")")
		}
	case p.Kind != "" && p.Kind != plexus.PendingGrant:
		prefix = p.Kind + ": "
	}
	return prefix + strings.Join(asks, ", "), windows, sens
}

// DescribeDecision says what became of a decided p, by whom and why:
// "denied by ann@example.com via cli at 2026-03-14 10:00: not now".
func DescribeDecision(p plexus.Pending) string {
	s := p.State
	if p.DecidedBy != "" {
		s += " by " + p.DecidedBy
	}
	if p.Via != "" {
		s += " via " + p.Via
	}
	if p.DecidedAt != nil {
		s += " at " + timeString(*p.DecidedAt)
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// WriteDecided says what a decision by did to p (made through the channel
// p.Via names), and where its file now is. An approved grant's token is the caller's
// to report: it is read from the journal.
func WriteDecided(w io.Writer, p plexus.Pending, by, file string) {
	switch {
	case p.SignIn != nil:
		writeSignInDecided(w, p, by, file)
	case p.State != plexus.StateApproved:
		what := describeItems(p.Items)
		if p.Extension != nil {
			what = "the extension " + p.Extension.Source + " is not registered"
		}
		fmt.Fprintf(w, "Rejected %s for %s: %s.\n", p.ID, dash(p.AgentID), what)
		fmt.Fprintf(w, "Denied by %s via %s: %s; the file is in %s.\n", by, dash(p.Via), p.Reason, file)
		fmt.Fprintln(w, "The agent is told with grant_resolved.")
	case p.Extension != nil:
		fmt.Fprintf(w, "Approved %s for %s: the extension %s is registered (%d entries, extension provenance).\n",
			p.ID, dash(p.AgentID), p.Extension.Source, len(p.Extension.Capabilities))
		fmt.Fprintf(w, "Approved by %s via %s; the file stands in %s while it is installed.\n", by, dash(p.Via), file)
	default:
		fmt.Fprintf(w, "Approved %s for %s: %s.\n", p.ID, dash(p.AgentID), describeItems(p.Items))
		fmt.Fprintf(w, "Approved by %s via %s; the file is in %s.\n", by, dash(p.Via), file)
	}
}

func describeItems(items []plexus.PendingItem) string {
	if len(items) == 0 {
		return "-"
	}
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = fmt.Sprintf("%s (%s, window %s)", it.CapabilityID, verbsString(it.Verbs), windowString(&it.TrustWindow))
	}
	return strings.Join(s, ", ")
}

// timeString formats t for a table in local time; far-future until-revoked
// stamps read as "never".
func timeString(t time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case time.Until(t) > 50*365*24*time.Hour:
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04")
}

func windowString(tw *plexus.TrustWindow) string { return dash(plexus.FormatTrustWindow(tw)) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clipLine flattens s to one line of at most n runes.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// writeSignInDecided says what approving or denying sign-in request p did.
func writeSignInDecided(w io.Writer, p plexus.Pending, by, file string) {
	s := p.SignIn
	if p.State != plexus.StateApproved {
		fmt.Fprintf(w, "Rejected %s: Plexus does not sign in to %s, which still needs sign-in.\n", p.ID, TermSafe(s.Server))
		fmt.Fprintf(w, "Denied by %s via %s: %s; the file is in %s.\n", by, dash(p.Via), p.Reason, file)
		return
	}
	fmt.Fprintf(w, "Approved %s: signing in to %s.\n", p.ID, TermSafe(s.Server))
	fmt.Fprintf(w, "Approved by %s via %s; the file is in %s.\n", by, dash(p.Via), file)
	writeSignInStarted(w, *s)
}
