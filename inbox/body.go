package inbox

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// NoteHeading leads the block a [RenderOptions.Note] is written into.
const NoteHeading = "**Plexus could not apply this file:**"

// humanTime is how the body writes times for a person.
const humanTime = "2006-01-02 15:04:05 UTC"

// body writes the markdown after the frontmatter. Every line it writes is
// either fixed text, gateway data through code (ids) or md (prose), so an
// agent's text can never add a link, an image, HTML or a heading.
type body struct {
	b *bytes.Buffer
}

func (w body) para(lines ...string) {
	w.b.WriteByte('\n')
	for _, l := range lines {
		w.b.WriteString(strings.TrimRight(l, " "))
		w.b.WriteByte('\n')
	}
}

func writeBody(b *bytes.Buffer, p plexus.Pending, fm *header, opts RenderOptions) {
	w := body{b}
	pending := p.State == plexus.StatePending
	w.para("# " + title(p))
	w.para(statusLine(p))
	if fm.Problem != "" {
		w.para(noteBlock(fm.Problem)...)
	}
	if opts.SameUser && pending {
		w.para("> **Warning: this agent runs as your own user.** Anything running as you, this agent included,",
			"> can move this file into `../active/` and so approve its own request. Approve only a request",
			"> you expected; docs/threat-model.md says how to run agents as another user or in a sandbox.")
	}
	w.reaches(p)
	w.narration(p)
	switch {
	case p.SignIn != nil:
		w.signInOrigin(*p.SignIn)
	case p.Definition == nil:
		w.agentSays(p, fm)
	}
	switch p.State {
	case plexus.StatePending:
		w.para("## What approving means")
		w.meaning(p)
		w.howToDecide(p)
	case plexus.StateApproved:
		w.para("## What was approved")
		w.meaning(p)
		w.decision(p, fm)
		if fm.Ended != "" {
			w.para("## Ended", "", "This approval no longer grants anything: "+md(fm.Ended)+".",
				"To grant it again, the agent asks again and a new decision file appears in `../inbox/`.")
			return
		}
		if s := p.SignIn; s != nil {
			w.signInStarted(*s)
			return
		}
		if c := p.Definition; c != nil {
			w.para("## Taking it back", "", "Delete this file or move it to `../archive/` to hold "+code(c.EntryID)+" out of the manifest",
				"again: the definition you approved before is pinned once more.")
			return
		}
		if p.Extension != nil {
			w.para("## Uninstalling", "", "Delete this file or move it to `../archive/` to remove the extension; every grant of",
				"its entries is revoked with it. (`plexus ext remove "+oneLine(p.Extension.Source)+"` does the same.)")
			return
		}
		w.para("## Revoking", "",
			"Delete this file or move it to `../archive/` to revoke what it grants; tokens carrying it stop",
			"working at once. A `once` grant moves to `../archive/` by itself after its one use, and a standing",
			"grant when its window ends.")
	default:
		w.para("## What was asked")
		w.meaning(p)
		w.decision(p, fm)
	}
}

func title(p plexus.Pending) string {
	agent := "An agent"
	if p.AgentID != "" {
		agent = code(p.AgentID)
	}
	switch p.Kind {
	case plexus.PendingGrant:
		switch len(p.Items) {
		case 0:
			return agent + " asks for a grant"
		case 1:
			return agent + " asks for " + code(p.Items[0].CapabilityID)
		}
		return fmt.Sprintf("%s asks for %d capabilities", agent, len(p.Items))
	case plexus.PendingExtension:
		if p.Extension == nil {
			return agent + " asks to register an extension"
		}
		t := agent + " asks to register the extension " + code(p.Extension.Source)
		var all []plexus.Verb
		for _, n := range p.Narration {
			if n.Reach != nil {
				all = append(all, n.Reach.Verbs...)
			}
		}
		if len(all) > 0 {
			t += ", which requires " + verbList(all)
		}
		return t
	case plexus.PendingInstall:
		return agent + " asks to install a source"
	case plexus.PendingDefinition:
		if c := p.Definition; c != nil {
			return code(c.Source) + " changed the definition of " + code(c.EntryID)
		}
		return "A source changed a definition"
	case plexus.PendingSignIn:
		if s := p.SignIn; s != nil {
			return signInTitle(*s)
		}
		return "A source asks you to sign in to it"
	}
	return agent + " asks for a decision of type " + code(p.Kind)
}

func statusLine(p plexus.Pending) string {
	parts := []string{"Decision " + code(p.ID), "**" + md(oneLine(p.State)) + "**"}
	if !p.CreatedAt.IsZero() {
		parts = append(parts, "asked "+p.CreatedAt.UTC().Format(humanTime))
	}
	if p.DecidedAt != nil {
		parts = append(parts, "decided "+p.DecidedAt.UTC().Format(humanTime))
	} else if !p.ExpiresAt.IsZero() {
		parts = append(parts, "expires "+p.ExpiresAt.UTC().Format(humanTime))
	}
	return strings.Join(parts, " · ")
}

// narration writes the gateway-authored summaries, one per capability in
// the file's order; a capability without one gets a summary made here from
// the same facts.
func (w body) narration(p plexus.Pending) {
	lines := []string{"## What Plexus says", ""}
	if p.State != plexus.StatePending {
		lines[0] = "## What Plexus said when it asked"
	}
	if p.Extension != nil || p.Definition != nil || p.SignIn != nil {
		// A registration, a changed definition or a sign-in has no capability items: the gateway's words,
		// one per entry it would add, are the narration, in the manifest's order.
		ns := slices.Clone(p.Narration)
		if m := p.Extension; m != nil {
			pos := func(n plexus.PendingNarration) int {
				return slices.IndexFunc(m.Capabilities, func(d plexus.ExtensionCapabilityDecl) bool { return extEntryID(m.Source, d.Name) == n.ID })
			}
			slices.SortStableFunc(ns, func(a, b plexus.PendingNarration) int { return pos(a) - pos(b) })
		}
		for _, n := range ns {
			if l := oneLine(n.Summary); l != "" {
				lines = append(lines, "- "+md(l))
			}
		}
		if len(lines) > 2 {
			w.para(lines...)
		}
		return
	}
	if len(p.Items) == 0 {
		return
	}
	for _, it := range p.Items {
		i := slices.IndexFunc(p.Narration, func(n plexus.PendingNarration) bool { return n.ID == it.CapabilityID })
		if i >= 0 && oneLine(p.Narration[i].Summary) != "" {
			lines = append(lines, "- "+md(oneLine(p.Narration[i].Summary)))
			continue
		}
		agent := "the agent"
		if p.AgentID != "" {
			agent = code(p.AgentID)
		}
		lines = append(lines, fmt.Sprintf("- Approving lets %s %s %s %s.", agent, verbWords(it.Verbs),
			code(it.CapabilityID), windowPhrase(it.TrustWindow, it.Verbs)))
	}
	w.para(lines...)
}

func (w body) agentSays(p plexus.Pending, fm *header) {
	lines := []string{"## The agent says", "", "The agent's own words, which Plexus has not checked:", ""}
	switch {
	case fm.Bundle == "" && fm.Purpose == "":
		lines = append(lines, "> (the agent gave no purpose)")
	case fm.Bundle == "":
		lines = append(lines, "> "+md(fm.Purpose))
	case fm.Purpose == "":
		lines = append(lines, "> Task: "+md(fm.Bundle))
	default:
		lines = append(lines, "> Task: "+md(fm.Bundle), ">", "> "+md(fm.Purpose))
	}
	if m := p.Extension; m != nil {
		// The manifest's prose is the agent's too: the label and
		// description say what the author wants the owner to believe.
		lines = append(lines, ">", "> Extension "+code(m.Source)+": "+md(capRunes(oneLine(m.Label), 120)))
		for _, d := range m.Capabilities {
			lines = append(lines, ">", "> "+code(extEntryID(m.Source, d.Name))+": "+md(capRunes(oneLine(d.Label), 120))+
				" — "+md(capRunes(oneLine(d.Describe), 400)))
		}
	}
	w.para(lines...)
}

// reaches writes, first, what each entry of the decision really touches and
// the verbs the gateway requires of it, from the gateway's reading of its
// route: the program and argv template, the URL, the provider, the members,
// the secrets. Only an extension's entries (and workflows) have one; a
// registration whose reach was not recorded says so.
func (w body) reaches(p plexus.Pending) {
	var ids []string
	switch {
	case p.Extension != nil:
		for _, d := range p.Extension.Capabilities {
			if d.Kind != plexus.KindSkill {
				ids = append(ids, extEntryID(p.Extension.Source, d.Name))
			}
		}
	case p.Definition == nil:
		for _, it := range p.Items {
			if plexus.ReachOf(p.Narration, it.CapabilityID) != nil {
				ids = append(ids, it.CapabilityID)
			}
		}
	}
	if len(ids) == 0 {
		return
	}
	lines := []string{"## What it reaches", "", "Read from each entry's route by Plexus (not from the agent's words): this is what runs.", ""}
	for _, id := range ids {
		r := plexus.ReachOf(p.Narration, id)
		if r == nil {
			lines = append(lines, "- "+code(id)+": Plexus did not record what it reaches (the request predates this check); deny it and ask again.")
			continue
		}
		lines = append(lines, reachLines(id, *r)...)
	}
	w.para(lines...)
}

// reachLines is one entry's reach: a head line with the verbs it requires
// (and why, when more than declared), then what it touches.
func reachLines(id string, r plexus.Reach) []string {
	head := "- " + code(id) + " requires **" + verbList(r.Verbs) + "**"
	if len(r.Declared) > 0 && !slices.Equal(plexus.NormalizeVerbs(r.Declared), plexus.NormalizeVerbs(r.Verbs)) {
		head += " (its author declared " + verbList(r.Declared) + ")"
	}
	if r.Why != "" {
		head += ": " + md(oneLine(r.Why))
	}
	head += "."
	lines := []string{head}
	if slices.Contains(r.Verbs, plexus.VerbExecute) {
		lines = append(lines, "  - Execute is never standing: each call asks you again.")
	}
	for _, l := range touches(r) {
		lines = append(lines, "  - "+l)
	}
	return lines
}

// touches says what r reaches, a line each.
func touches(r plexus.Reach) []string {
	var out []string
	switch r.Transport {
	case plexus.TransportCLI, plexus.TransportStdio:
		what := "runs " + codeExact(r.Bin)
		if r.Path != "" {
			what = "runs " + codeExact(r.Path)
			if r.Path != r.Bin {
				what += " (" + codeExact(r.Bin) + " on the daemon's PATH)"
			}
		}
		if len(r.Args) == 0 {
			what += " with no arguments"
		} else {
			args := make([]string, len(r.Args))
			for i, a := range r.Args {
				args[i] = codeExact(a)
			}
			what += " with the arguments " + strings.Join(args, " ")
			if r.Transport == plexus.TransportCLI {
				what += " ({…} is filled from the call's input, one argument each)"
			}
		}
		if r.Transport == plexus.TransportStdio {
			what += ", kept running, and calls its method " + codeExact(r.Method)
		}
		out = append(out, what)
		if r.Target != "" {
			out = append(out, codeExact(r.Path)+" is a link: the file that runs is "+codeExact(r.Target))
		}
	case plexus.TransportLocalREST:
		if r.URL != "" {
			out = append(out, "sends "+codeExact(r.Method)+" "+codeExact(r.URL))
		}
	case plexus.TransportIPC:
		out = append(out, "asks the ipc provider "+codeExact(r.Provider)+" to run its command "+codeExact(r.Tool))
	case plexus.TransportWorkflow:
		ms := make([]string, len(r.Members))
		for i, m := range r.Members {
			ms[i] = code(m.ID) + " (" + verbList(m.Verbs) + ")"
		}
		out = append(out, "runs, in order, "+strings.Join(ms, ", "))
	}
	if r.Unknown != "" {
		out = append(out, "**Cannot be known:** "+md(oneLine(r.Unknown))+".")
	}
	if len(r.Secrets) > 0 {
		out = append(out, "is handed the secrets "+codes(r.Secrets))
	}
	return out
}

// meaning writes, per capability, what an approval really grants: the
// verbs, the real trust window (execute: this one use only), the
// constraint and a workflow's members.
func (w body) meaning(p plexus.Pending) {
	if m := p.Extension; m != nil {
		w.extension(*m, p.Narration)
		return
	}
	if c := p.Definition; c != nil {
		w.definition(*c)
		return
	}
	if s := p.SignIn; s != nil {
		w.signIn(*s)
		return
	}
	if len(p.Items) == 0 {
		w.para("Nothing but the decision itself; see the frontmatter.")
		return
	}
	var lines []string
	for _, it := range p.Items {
		l := fmt.Sprintf("- %s: %s, %s", code(it.CapabilityID), verbList(it.Verbs), windowPhrase(it.TrustWindow, it.Verbs))
		var facts []string
		if it.Provenance != "" {
			facts = append(facts, md(oneLine(string(it.Provenance))))
		}
		if it.Sensitivity != "" {
			facts = append(facts, md(oneLine(string(it.Sensitivity)))+" sensitivity")
		}
		if len(facts) > 0 {
			l += " (" + strings.Join(facts, ", ") + ")"
		}
		lines = append(lines, l+".")
		if it.Constraint != nil {
			lines = append(lines, "  - only for calls the `constraint` admits: "+describeConstraint(it.Constraint)+".")
		}
		if len(it.Members) > 0 {
			ms := make([]string, len(it.Members))
			for i, m := range it.Members {
				ms[i] = code(m.ID) + " (" + verbList(m.Verbs) + ")"
			}
			lines = append(lines, "  - as a workflow it also calls "+strings.Join(ms, ", ")+".")
		}
	}
	w.para(lines...)
}

func (w body) howToDecide(p plexus.Pending) {
	lines := []string{"## How to decide", "",
		"- **Approve:** move this file to `../active/`, or run `plexus approve " + p.ID + "`.",
		"- **Deny:** write why after `reason:` in the frontmatter, then move this file to `../rejected/`;",
		"  or run `plexus reject " + p.ID + " --reason \"…\"`.",
		"- **Withdraw:** delete this file.",
	}
	if !p.ExpiresAt.IsZero() {
		lines = append(lines, "- **Do nothing:** the request expires at "+p.ExpiresAt.UTC().Format(humanTime)+
			" and this file moves to `../archive/`.")
	}
	w.para(lines...)
	var ways []string
	if slices.ContainsFunc(p.Items, func(it plexus.PendingItem) bool {
		return it.TrustWindow.Kind != plexus.WindowOnce && !slices.Contains(it.Verbs, plexus.VerbExecute)
	}) {
		ways = append(ways, "- shorten a `window`: `once`, `1h`, `1d`, `7d`, or a duration such as `36h` or `3d`;")
	}
	if slices.ContainsFunc(p.Items, func(it plexus.PendingItem) bool { return len(plexus.NormalizeVerbs(it.Verbs)) > 1 }) {
		ways = append(ways, "- remove verbs from a `verbs` list;")
	}
	if len(p.Items) > 1 {
		ways = append(ways, "- remove capabilities from `capabilities` (keep at least one);")
	}
	if slices.ContainsFunc(p.Items, func(it plexus.PendingItem) bool { return it.Constraint != nil }) {
		ways = append(ways, "- tighten a `constraint`: fewer paths or values, more `match` rules;")
	}
	if p.SignIn != nil {
		w.para("## How to narrow", "", "A sign-in request is approved or denied as a whole: the server asks for its scopes, the",
			"request in the journal is what approving starts, and edits to this file change nothing.")
		return
	}
	if p.Definition != nil {
		w.para("## How to narrow", "", "A changed definition is approved or denied as a whole: the definition in the journal is",
			"what approving pins, and edits to this file change nothing.")
		return
	}
	if p.Extension != nil {
		w.para("## How to narrow", "", "A registration is approved or denied as a whole: the manifest in the journal is what",
			"approving registers, and edits to this file change nothing. Each entry's grants are decided later, one by one.")
		return
	}
	if len(ways) == 0 {
		w.para("## How to narrow", "", "This request is as narrow as it gets: approve it or deny it as it stands.")
		return
	}
	ways[len(ways)-1] = strings.TrimSuffix(ways[len(ways)-1], ";") + "."
	lines = append([]string{"## How to narrow", "", "Before approving you may edit the frontmatter to grant less, never more:", ""}, ways...)
	lines = append(lines, "",
		"An edit that widens the request (a capability or a verb added, a longer window, a looser",
		"constraint) or that changes `id`, `type` or `agent` is refused: the file comes back here with",
		"the reason at the top, and nothing is approved. The other fields are Plexus's own; editing them",
		"changes nothing.")
	if slices.ContainsFunc(p.Items, func(it plexus.PendingItem) bool { return slices.Contains(it.Verbs, plexus.VerbExecute) }) {
		lines = append(lines, "", "Execute is never standing: its window stays `once`.")
	}
	w.para(lines...)
}

func (w body) decision(p plexus.Pending, fm *header) {
	var what string
	switch p.State {
	case plexus.StateApproved:
		what = "Approved"
	case plexus.StateDenied:
		what = "Denied"
	case plexus.StateExpired:
		what = "Expired without a decision"
	case plexus.StateWithdrawn:
		what = "Withdrawn"
	default:
		what = "Closed as " + md(oneLine(p.State))
	}
	if p.DecidedBy != "" {
		what += " by " + code(p.DecidedBy)
	}
	if p.Via != "" {
		what += " via " + code(p.Via)
	}
	if p.DecidedAt != nil {
		what += " at " + p.DecidedAt.UTC().Format(humanTime)
	}
	lines := []string{"## Decision", "", what + "."}
	if fm.Reason != "" {
		lines = append(lines, "", "Reason given: "+md(fm.Reason))
	}
	w.para(lines...)
}

// extension lists what registering an agent's manifest adds, in the
// gateway's words; what each entry reaches is under "What it reaches" and
// the author's prose under "The agent says".
func (w body) extension(m plexus.ExtensionManifest, narration []plexus.PendingNarration) {
	lines := []string{fmt.Sprintf("Plexus registers the source %s with these entries, as an extension: calling any of them "+
		"still needs a grant, and every grant of an extension asks you first.", code(m.Source)), ""}
	for _, d := range m.Capabilities {
		t := d.Transport
		if t == "" {
			t = m.Transport
		}
		id := extEntryID(m.Source, d.Name)
		vs := d.Grants
		if r := plexus.ReachOf(narration, id); r != nil && len(r.Verbs) > 0 {
			vs = r.Verbs
		}
		verbs := "no verbs"
		if len(vs) > 0 {
			verbs = "requires " + verbList(vs)
		}
		lines = append(lines, fmt.Sprintf("- %s: a %s over %s, %s.", code(id), md(oneLine(string(d.Kind))),
			md(oneLine(string(t))), verbs))
	}
	if len(m.Secrets) > 0 {
		names := make([]string, len(m.Secrets))
		for i, s := range m.Secrets {
			names[i] = code(s.Name)
		}
		lines = append(lines, "", "It uses the secrets "+strings.Join(names, ", ")+" (set them with `plexus secrets set <name>`; it never sees them itself).")
	}
	w.para(lines...)
}

// extEntryID is the id a declaration gets (registry.EntryID; inbox does
// not import the registry).
func extEntryID(source, name string) string { return strings.ReplaceAll(source, ":", ".") + "." + name }

func verbWords(vs []plexus.Verb) string {
	words := make([]string, 0, len(vs))
	for _, v := range plexus.NormalizeVerbs(vs) {
		words = append(words, strings.ToUpper(string(v)))
	}
	return strings.Join(words, " and ")
}

func verbList(vs []plexus.Verb) string {
	words := make([]string, 0, len(vs))
	for _, v := range plexus.NormalizeVerbs(vs) {
		words = append(words, string(v))
	}
	return strings.Join(words, ", ")
}

// describeConstraint spells c in a line: which input fields it pins down.
func describeConstraint(c *plexus.ScopeConstraint) string {
	var parts []string
	if pp := c.PathPrefix; pp != nil {
		parts = append(parts, code(pp.Field)+" under "+codes(pp.Allow))
	}
	if al := c.Allow; al != nil {
		parts = append(parts, code(al.Field)+" one of "+codes(al.Values))
	}
	for _, m := range c.Match {
		switch m.Op {
		case "in":
			vs := make([]string, len(m.Values))
			for i, v := range m.Values {
				vs[i] = fmt.Sprint(v)
			}
			parts = append(parts, code(m.Field)+" one of "+codes(vs))
		case "prefix":
			parts = append(parts, code(m.Field)+" starting with "+code(fmt.Sprint(m.Value)))
		default:
			parts = append(parts, code(m.Field)+" "+md(oneLine(m.Op))+" "+code(fmt.Sprint(m.Value)))
		}
	}
	return strings.Join(parts, "; ")
}

func codes(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}
