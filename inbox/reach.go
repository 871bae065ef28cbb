package inbox

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/plexus-gw/plexus"
)

// This file is a decision's reach for a terminal (plexus show and pending),
// beside the decision file's own rendering of it: the same reach, but
// quoted Go-style and escaped as \uXXXX rather than as Markdown code spans,
// so the two are kept apart.

// Reaches are the recorded reaches of p's entries, in the order the
// decision lists them (a registration's manifest order, a grant's items),
// each with its entry id; an entry of a registration without one is listed
// with a nil reach (the decision predates the check).
func Reaches(p plexus.Pending) (ids []string, rs []*plexus.Reach) {
	switch {
	case p.Extension != nil:
		for _, d := range p.Extension.Capabilities {
			if d.Kind != plexus.KindSkill {
				id := extEntryID(p.Extension.Source, d.Name)
				ids, rs = append(ids, id), append(rs, plexus.ReachOf(p.Narration, id))
			}
		}
	case p.Definition == nil:
		for _, it := range p.Items {
			if r := plexus.ReachOf(p.Narration, it.CapabilityID); r != nil {
				ids, rs = append(ids, it.CapabilityID), append(rs, r)
			}
		}
	}
	return ids, rs
}

// WriteReaches prints what each entry of p reaches and requires, from the
// gateway's reading of its routes; nothing when p has no extension entry.
func WriteReaches(w io.Writer, p plexus.Pending) {
	ids, rs := Reaches(p)
	if len(ids) == 0 {
		return
	}
	fmt.Fprintln(w, "\n  What it reaches (read from the routes by Plexus, not the agent's words):")
	for i, id := range ids {
		r := rs[i]
		if r == nil {
			fmt.Fprintf(w, "  %s  not recorded: the request predates this check; deny it and ask again\n", id)
			continue
		}
		head := fmt.Sprintf("  %s  requires %s", id, verbsString(r.Verbs))
		if len(r.Declared) > 0 && !slices.Equal(plexus.NormalizeVerbs(r.Declared), plexus.NormalizeVerbs(r.Verbs)) {
			head += fmt.Sprintf(" (declared %s)", verbsString(r.Declared))
		}
		fmt.Fprintln(w, head)
		if r.Why != "" {
			fmt.Fprintf(w, "      why: %s\n", TermSafe(r.Why))
		}
		if slices.Contains(r.Verbs, plexus.VerbExecute) {
			fmt.Fprintln(w, "      execute is never standing: each call asks you again")
		}
		fmt.Fprintf(w, "      %s\n", reachString(*r))
		if r.Unknown != "" {
			fmt.Fprintf(w, "      cannot be known: %s\n", TermSafe(r.Unknown))
		}
		if len(r.Secrets) > 0 {
			fmt.Fprintf(w, "      handed the secrets %s\n", quoted(r.Secrets))
		}
	}
}

// reachString is what r touches, in a line: every value the route gives
// quoted, so that a space, a control or a bidi character is seen for what
// it is.
func reachString(r plexus.Reach) string {
	switch r.Transport {
	case plexus.TransportCLI, plexus.TransportStdio:
		prog := strconv.Quote(r.Bin) + " (not resolved)"
		if r.Path != "" {
			prog = strconv.Quote(r.Path)
		}
		if r.Target != "" {
			prog += " → " + strconv.Quote(r.Target)
		}
		s := "runs " + prog + " with argv " + quoted(r.Args)
		if r.Transport == plexus.TransportStdio {
			s += " and calls its method " + strconv.Quote(r.Method)
		}
		return s
	case plexus.TransportLocalREST:
		return "sends " + strconv.Quote(r.Method) + " " + strconv.Quote(r.URL)
	case plexus.TransportIPC:
		return "asks the ipc provider " + strconv.Quote(r.Provider) + " to run " + strconv.Quote(r.Tool)
	case plexus.TransportWorkflow:
		ms := make([]string, len(r.Members))
		for i, m := range r.Members {
			ms[i] = m.ID + " (" + verbsString(m.Verbs) + ")"
		}
		return "runs, in order, " + TermSafe(strings.Join(ms, ", "))
	}
	return "over " + TermSafe(string(r.Transport))
}

// ReachBrief is reachString for a table cell: the program and argv, the
// URL, the provider or the members.
func ReachBrief(r plexus.Reach) string {
	switch r.Transport {
	case plexus.TransportCLI, plexus.TransportStdio:
		prog := r.Path
		if prog == "" {
			prog = r.Bin + "?"
		}
		if r.Target != "" {
			return strconv.Quote(prog) + " → " + strconv.Quote(r.Target) + " " + quoted(r.Args)
		}
		return strconv.Quote(prog) + " " + quoted(r.Args)
	case plexus.TransportLocalREST:
		return r.Method + " " + strconv.Quote(r.URL)
	case plexus.TransportIPC:
		return "ipc " + strconv.Quote(r.Provider) + " " + strconv.Quote(r.Tool)
	case plexus.TransportWorkflow:
		return fmt.Sprintf("workflow of %d", len(r.Members))
	}
	return TermSafe(string(r.Transport))
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TermSafe escapes the characters that would restyle or reorder a
// terminal's text (controls, bidi and other format characters).
func TermSafe(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// verbsString is vs as the CLI lists verbs: comma-separated as given, "-"
// for none.
func verbsString(vs []plexus.Verb) string { return dash(plexus.FormatVerbs(vs)) }
