package client

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plexus-gw/plexus"
)

// This file is the gateway's views for a person: the tables and reports the
// command line prints of what [Admin] and [Agent] return (status, agents,
// grants, the entries an agent can call). A decision's own rendering is
// inbox's, beside the decision file.

// WriteStatus prints a running gateway's status: what it serves, the
// journal's write failures, and agents that run as the owner's own user.
func WriteStatus(w io.Writer, st plexus.StatusResponse) error {
	fmt.Fprintf(w, "Plexus %s (protocol %s) running at %s\n", st.Gateway.Version, st.Gateway.Protocol, st.Gateway.BaseURL)
	t := newTable(w)
	fmt.Fprintf(t, "home:\t%s\n", dash(st.Home))
	if !st.Started.IsZero() {
		fmt.Fprintf(t, "started:\t%s (up %s)\n", timeString(st.Started), time.Since(st.Started).Round(time.Minute))
	}
	fmt.Fprintf(t, "entries:\t%d (revision %d)\n", st.Entries, st.Revision)
	fmt.Fprintf(t, "agents:\t%d\n", st.Agents)
	fmt.Fprintf(t, "grants:\t%d\n", st.Grants)
	fmt.Fprintf(t, "pending:\t%d\n", st.Pending)
	if j := st.Journal; j != nil {
		writeJournalHealth(t, *j)
	}
	if st.Limits != nil {
		writeLimits(t, *st.Limits)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	writeLimitsError(w, st.Limits)
	if err := writeSources(w, st.Sources); err != nil {
		return err
	}
	if len(st.SameUserAgents) > 0 {
		fmt.Fprintf(w, "\nWARNING: these agents run as your own OS user: %s.\n", strings.Join(st.SameUserAgents, ", "))
		fmt.Fprintln(w, "They can read PLEXUS_HOME (keys, journal) and step around the gateway. Run them as another")
		fmt.Fprintln(w, "user or in a sandbox, or set \"strictSameUser\": true in auth-config.json to refuse them.")
	}
	return nil
}

// writeJournalHealth adds the journal's failure counters to the status
// table, each only when it is not zero.
func writeJournalHealth(t io.Writer, j plexus.JournalHealth) {
	last := ""
	if j.LastFailure != nil {
		last = fmt.Sprintf(" (last: %s %s)", timeString(*j.LastFailure), j.LastWhat)
	}
	if j.WriteFailures > 0 {
		fmt.Fprintf(t, "journal write failures:\t%d%s\n", j.WriteFailures, last)
	}
	if j.MirrorFailures > 0 {
		fmt.Fprintf(t, "audit mirror write failures:\t%d (run plexus journal verify)\n", j.MirrorFailures)
	}
	if j.AnchorFailures > 0 {
		fmt.Fprintf(t, "journal anchor write failures:\t%d (run plexus journal verify)\n", j.AnchorFailures)
	}
}

// writeSources is the status's table of sources, after a blank line; nothing
// when there are none.
func writeSources(w io.Writer, sources []plexus.SourceStatus) error {
	if len(sources) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "SOURCE\tPROVENANCE\tENTRIES\tHEALTH")
	for _, s := range sources {
		health := string(s.Health.Status)
		switch {
		case s.Health.NeedsSignIn:
			health = s.Health.Detail // "needs sign-in: run plexus mcp login <name>"
		case s.Health.Detail != "":
			health += " (" + s.Health.Detail + ")"
		}
		if s.Health.Restarts > 0 {
			health += fmt.Sprintf(", restarted %d×", s.Health.Restarts)
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\n", s.ID, dash(string(s.Provenance)), s.Entries, dash(health))
	}
	return t.Flush()
}

// WriteConnected tells the owner about a just-connected agent: its one-time
// enrollment code (shown this once), the command to run on the agent's
// side, and the starting grants it got or was refused.
func WriteConnected(w io.Writer, resp plexus.ConnectResponse, install string) error {
	fmt.Fprintf(w, "Connected agent %q.\n\n", resp.AgentID)
	fmt.Fprintf(w, "One-time enrollment code (shown once; valid until %s, %s from now):\n\n  %s\n\n",
		resp.ExpiresAt.Local().Format("15:04:05"), roughly(time.Until(resp.ExpiresAt)), resp.Code)
	fmt.Fprintf(w, "On the agent's side, run:\n\n  %s\n", install)
	if len(resp.Grants) > 0 {
		fmt.Fprintln(w, "\nStanding grants:")
		if err := WriteGrants(w, resp.Grants, false); err != nil {
			return err
		}
	}
	for _, d := range resp.Declined {
		fmt.Fprintf(w, "Declined %s: %s\n", d.ID, d.Reason)
	}
	return nil
}

// WriteAgents prints the connected agents and where each stands.
func WriteAgents(w io.Writer, agents []plexus.Agent) error {
	t := newTable(w)
	fmt.Fprintln(t, "AGENT\tLABEL\tSTATE\tCREATED")
	for _, a := range agents {
		state := "waiting for enrollment"
		switch {
		case a.RevokedAt != nil:
			state = "revoked " + timeString(*a.RevokedAt)
		case a.EnrolledAt != nil:
			state = "enrolled " + timeString(*a.EnrolledAt)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", a.ID, dash(a.Label), state, timeString(a.CreatedAt))
	}
	return t.Flush()
}

// WriteGrants prints a table of standing grants, with the agent's column
// when withAgent.
func WriteGrants(w io.Writer, grants []plexus.StandingGrant, withAgent bool) error {
	t := newTable(w)
	if withAgent {
		fmt.Fprint(t, "AGENT\t")
	}
	fmt.Fprintln(t, "CAPABILITY\tVERBS\tWINDOW\tEXPIRES\tPROVENANCE\tSENSITIVITY")
	for _, g := range grants {
		if withAgent {
			fmt.Fprintf(t, "%s\t", g.AgentID)
		}
		expires := timeString(g.ExpiresAt)
		if !g.Standing {
			expires = "after one use"
		}
		id := g.CapabilityID
		if g.SynthesizedFor != "" {
			id += " (via " + g.SynthesizedFor + ")"
		}
		if g.TopLevelDisabled {
			id += " [disabled]"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", id, VerbsString(g.Verbs), dash(plexus.FormatTrustWindow(&g.TrustWindow)), expires,
			dash(string(g.Provenance)), dash(string(g.Sensitivity)))
	}
	return t.Flush()
}

// WriteEntries prints what an agent can call and what calling each takes.
func WriteEntries(w io.Writer, entries []ListEntry) error {
	t := newTable(w)
	fmt.Fprintln(t, "CAPABILITY\tVERBS\tPROVENANCE\tSENSITIVITY\tSTATUS\tLABEL")
	for _, e := range entries {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, VerbsString(e.Verbs), e.Provenance,
			dash(string(e.Sensitivity)), posture(e), dash(e.Label))
	}
	return t.Flush()
}

// posture says what calling an entry will take right now, in the words of
// the default confirm-risky policy: held or standing grants call at once,
// low-sensitivity reads approve themselves on first use, execute asks the
// owner every time, anything else asks the owner once per trust window.
func posture(e ListEntry) string {
	switch {
	case e.Via == ViaAutoApprove:
		return "AUTO-APPROVED ON FIRST CALL"
	case e.CallableNow:
		return "CALLABLE NOW"
	case slices.Contains(e.Verbs, plexus.VerbExecute):
		return "OWNER APPROVES EACH USE"
	case e.Sensitivity == plexus.SensitivityLow:
		return "AUTO-APPROVED ON FIRST CALL"
	}
	return "NEEDS OWNER APPROVAL"
}

// VerbsString is vs as a table lists verbs: comma-separated as given, "-"
// for none.
func VerbsString(vs []plexus.Verb) string { return dash(plexus.FormatVerbs(vs)) }

// newTable returns a tabwriter for a human table; Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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

// roughly formats d for a person: "15 min", "2 h", "3 days".
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
