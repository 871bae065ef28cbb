package planexe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The phases of §8.2, in the order a run passes through them.
const (
	PhaseInitializing   = "initializing"
	PhaseGeneratingPlan = "generating_plan"
	PhaseValidating     = "validating"
	PhaseExporting      = "exporting"
	PhaseFinalizing     = "finalizing"
)

// The targets of §8.1.
const (
	TargetBuildPlan            = "build_plan"
	TargetValidatePlan         = "validate_plan"
	TargetBuildPlanAndValidate = "build_plan_and_validate"
)

// The artifact kinds of Appendix B.
const (
	KindPlan         = "plan"
	KindAuditReport  = "audit_report"
	KindLog          = "log"
	KindState        = "state"
	KindIntermediate = "intermediate"
)

// The server's own bookkeeping artifacts (§14).
const (
	runLogPath     = "run.log"
	luigiStatePath = "luigi_state.json"
	runErrorPath   = "run_error.json"
)

const (
	defaultTarget       = TargetBuildPlanAndValidate
	defaultResumePolicy = "luigi_up_to_date"
	sourcesPrefix       = "<!-- derived from "
)

// Targets returns the targets of §8.1.
func Targets() []string {
	return []string{TargetBuildPlan, TargetValidatePlan, TargetBuildPlanAndValidate}
}

// task is one node of the DAG: a Luigi task with one output file. produce is
// a pure function of the idea and the task's input files, so that the same
// inputs give the same bytes (§17.2) and an edit to an input changes the
// output (the input hashes are written into every output).
type task struct {
	Name    string
	Phase   string
	Output  string
	Kind    string
	Inputs  []string
	produce func(idea string, in inputs) ([]byte, error)
}

// inputs holds a task's input files by path.
type inputs map[string][]byte

// sources renders the hashes of the inputs, in input order, for the footer
// every output carries.
func (in inputs) sources(paths []string) string {
	parts := make([]string, 0, len(paths))
	for _, p := range paths {
		parts = append(parts, p+" sha256:"+sha256Hex(in[p]))
	}
	return strings.Join(parts, ", ")
}

// pipeline is the DAG of the stand-in planner. It is built by newPipeline and
// never changed afterwards, so it is shared by every session without a lock.
type pipeline struct {
	tasks    []*task // topological order, and within it phase order
	byName   map[string]*task
	byOutput map[string]*task
	targets  map[string][]string // target → its final tasks
}

func newPipeline() *pipeline {
	tasks := []*task{
		{Name: "SetupPrompt", Phase: PhaseInitializing, Output: "prompt.md", Kind: KindIntermediate,
			produce: setupPrompt},
		{Name: "ExtractAssumptions", Phase: PhaseGeneratingPlan, Output: "assumptions.md", Kind: KindIntermediate,
			Inputs: []string{"prompt.md"}, produce: extractAssumptions},
		{Name: "DraftOutline", Phase: PhaseGeneratingPlan, Output: "outline.md", Kind: KindIntermediate,
			Inputs: []string{"prompt.md", "assumptions.md"}, produce: draftOutline},
		{Name: "WriteDetailedPlan", Phase: PhaseGeneratingPlan, Output: "plan.md", Kind: KindPlan,
			Inputs: []string{"outline.md", "assumptions.md"}, produce: writeDetailedPlan},
		{Name: "StructurePlan", Phase: PhaseGeneratingPlan, Output: "plan.json", Kind: KindPlan,
			Inputs: []string{"plan.md"}, produce: structurePlan},
		{Name: "SelfAudit", Phase: PhaseValidating, Output: "audit.json", Kind: KindIntermediate,
			Inputs: []string{"plan.json", "assumptions.md"}, produce: selfAudit},
		{Name: "WriteValidationReport", Phase: PhaseValidating, Output: "validation_report.html", Kind: KindAuditReport,
			Inputs: []string{"audit.json", "plan.md"}, produce: writeValidationReport},
		{Name: "ExportPlan", Phase: PhaseExporting, Output: "plan.html", Kind: KindPlan,
			Inputs: []string{"plan.md", "plan.json"}, produce: exportPlan},
		{Name: "ExportSummary", Phase: PhaseExporting, Output: "summary.md", Kind: KindPlan,
			Inputs: []string{"plan.json", "audit.json"}, produce: exportSummary},
	}
	p := &pipeline{
		tasks:    tasks,
		byName:   make(map[string]*task),
		byOutput: make(map[string]*task),
		targets: map[string][]string{
			TargetBuildPlan:            {"ExportPlan"},
			TargetValidatePlan:         {"WriteValidationReport"},
			TargetBuildPlanAndValidate: {"ExportPlan", "WriteValidationReport", "ExportSummary"},
		},
	}
	for _, t := range tasks {
		p.byName[t.Name] = t
		p.byOutput[t.Output] = t
	}
	return p
}

// plan returns the tasks a run of target needs: the final tasks and
// everything upstream of them, in execution order.
func (p *pipeline) plan(target string) []*task {
	need := make(map[string]bool)
	var visit func(name string)
	visit = func(name string) {
		if need[name] {
			return
		}
		need[name] = true
		for _, in := range p.byName[name].Inputs {
			visit(p.byOutput[in].Name)
		}
	}
	for _, f := range p.targets[target] {
		visit(f)
	}
	var out []*task
	for _, t := range p.tasks {
		if need[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// downstream returns the tasks named and every task that consumes, directly
// or transitively, an output of one of them.
func (p *pipeline) downstream(names []string) map[string]bool {
	stale := make(map[string]bool)
	for _, n := range names {
		stale[n] = true
	}
	// One pass suffices: tasks are in topological order.
	for _, t := range p.tasks {
		for _, in := range t.Inputs {
			if stale[p.byOutput[in].Name] {
				stale[t.Name] = true
			}
		}
	}
	return stale
}

// dependents returns the tasks that consume, directly or transitively, one of
// the artifacts at paths. The producers of those artifacts are not included:
// invalidating an artifact means "treat it as changed", not "regenerate it"
// (§6.5: mark downstream tasks dependent on these artifacts as stale).
func (p *pipeline) dependents(paths []string) map[string]bool {
	var direct []string
	for _, t := range p.tasks {
		for _, in := range t.Inputs {
			if slices.Contains(paths, in) {
				direct = append(direct, t.Name)
				break
			}
		}
	}
	if len(direct) == 0 {
		return map[string]bool{}
	}
	return p.downstream(direct)
}

// kindOf returns the §4.1 kind of the artifact at path.
func (p *pipeline) kindOf(path string) string {
	if t, ok := p.byOutput[path]; ok {
		return t.Kind
	}
	switch path {
	case runLogPath, runErrorPath:
		return KindLog
	case luigiStatePath:
		return KindState
	}
	return KindIntermediate
}

// serverManaged reports whether the artifact at path is the server's own
// bookkeeping, which artifact.write must refuse: rewriting luigi_state.json
// or run.log would falsify the record resume and audits rely on.
func serverManaged(path string) bool {
	return path == runLogPath || path == luigiStatePath || path == runErrorPath
}

func contentTypeOf(path string) string {
	switch {
	case strings.HasSuffix(path, ".md"):
		return "text/markdown"
	case strings.HasSuffix(path, ".html"):
		return "text/html"
	case strings.HasSuffix(path, ".json"):
		return "application/json"
	case strings.HasSuffix(path, ".log"), strings.HasSuffix(path, ".txt"):
		return "text/plain"
	}
	return "application/octet-stream"
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The task functions below stand in for the language model: each is a
// deterministic text transformation of its inputs.

func setupPrompt(idea string, _ inputs) ([]byte, error) {
	return []byte("# Prompt\n\n" + strings.TrimSpace(idea) + "\n"), nil
}

// words splits text into lower-case runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// body drops markdown headings and HTML comments, leaving the prose.
func body(md []byte) string {
	var b strings.Builder
	for line := range strings.Lines(string(md)) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || strings.HasPrefix(t, "<!--") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

func extractAssumptions(_ string, in inputs) ([]byte, error) {
	prose := body(in["prompt.md"])
	ws := words(prose)
	stop := map[string]bool{"that": true, "this": true, "with": true, "from": true, "have": true,
		"will": true, "into": true, "about": true, "their": true, "there": true, "which": true, "would": true}
	count := make(map[string]int)
	for _, w := range ws {
		if len([]rune(w)) >= 4 && !stop[w] {
			count[w]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > 5 {
		keys = keys[:5]
	}
	var b strings.Builder
	b.WriteString("# Assumptions\n\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "- The plan is about %q.\n", k)
	}
	fmt.Fprintf(&b, "- The idea is stated in %d words.\n", len(ws))
	fmt.Fprintf(&b, "\n%s%s -->\n", sourcesPrefix, in.sources([]string{"prompt.md"}))
	return []byte(b.String()), nil
}

// bullets returns the text of the "- " lines of md.
func bullets(md []byte) []string {
	var out []string
	for line := range strings.Lines(string(md)) {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			out = append(out, t)
		}
	}
	return out
}

func firstProseLine(md []byte) string {
	for line := range strings.Lines(body(md)) {
		if t := strings.TrimSpace(line); t != "" {
			if r := []rune(t); len(r) > 80 {
				t = string(r[:80])
			}
			return t
		}
	}
	return "Untitled"
}

func draftOutline(_ string, in inputs) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Outline: %s\n\n", firstProseLine(in["prompt.md"]))
	n := 0
	for _, a := range bullets(in["assumptions.md"]) {
		n++
		fmt.Fprintf(&b, "## %d. %s\n\n", n, strings.TrimSuffix(a, "."))
	}
	fmt.Fprintf(&b, "## %d. Review and next steps\n\n", n+1)
	fmt.Fprintf(&b, "%s%s -->\n", sourcesPrefix, in.sources([]string{"prompt.md", "assumptions.md"}))
	return []byte(b.String()), nil
}

var headingNumber = regexp.MustCompile(`^\d+\.\s*`)

func writeDetailedPlan(_ string, in inputs) ([]byte, error) {
	outline := string(in["outline.md"])
	title := "Untitled"
	var sections []string
	for line := range strings.Lines(outline) {
		t := strings.TrimSpace(line)
		if h, ok := strings.CutPrefix(t, "## "); ok {
			sections = append(sections, headingNumber.ReplaceAllString(h, ""))
		} else if h, ok := strings.CutPrefix(t, "# "); ok {
			title = strings.TrimPrefix(h, "Outline: ")
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Plan: %s\n\n", title)
	fmt.Fprintf(&b, "Assumptions considered: %d\n\n", len(bullets(in["assumptions.md"])))
	for _, s := range sections {
		fmt.Fprintf(&b, "## %s\n\n", s)
		fmt.Fprintf(&b, "1. Research %s (%d words).\n", s, len(words(s)))
		fmt.Fprintf(&b, "2. Draft the work for %s.\n", s)
		fmt.Fprintf(&b, "3. Review %s against the assumptions.\n\n", s)
	}
	fmt.Fprintf(&b, "%s%s -->\n", sourcesPrefix, in.sources([]string{"outline.md", "assumptions.md"}))
	return []byte(b.String()), nil
}

// planDoc is the shape of plan.json.
type planDoc struct {
	Title     string            `json:"title"`
	Sections  []planSection     `json:"sections"`
	WordCount int               `json:"word_count"`
	Source    map[string]string `json:"source"`
}

type planSection struct {
	Title string   `json:"title"`
	Steps []string `json:"steps"`
}

var stepLine = regexp.MustCompile(`^(\d+)\.\s+(.*)$`)

func structurePlan(_ string, in inputs) ([]byte, error) {
	md := in["plan.md"]
	doc := planDoc{Sections: []planSection{}, WordCount: len(words(body(md))),
		Source: map[string]string{"plan.md": sha256Hex(md)}}
	for line := range strings.Lines(string(md)) {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "## "):
			doc.Sections = append(doc.Sections, planSection{Title: strings.TrimPrefix(t, "## "), Steps: []string{}})
		case strings.HasPrefix(t, "# ") && doc.Title == "":
			doc.Title = strings.TrimPrefix(strings.TrimPrefix(t, "# "), "Plan: ")
		default:
			if m := stepLine.FindStringSubmatch(t); m != nil && len(doc.Sections) > 0 {
				s := &doc.Sections[len(doc.Sections)-1]
				s.Steps = append(s.Steps, m[2])
			}
		}
	}
	return marshalDoc(doc)
}

func marshalDoc(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return append(b, '\n'), nil
}

// auditDoc is the shape of audit.json.
type auditDoc struct {
	Checks []auditCheck       `json:"checks"`
	Passed int                `json:"passed"`
	Total  int                `json:"total"`
	Source map[string]string  `json:"source"`
	Plan   map[string]float64 `json:"plan"`
}

type auditCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

var quoted = regexp.MustCompile(`"([^"]+)"`)

func decodePlan(b []byte) (planDoc, error) {
	var doc planDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return planDoc{}, fmt.Errorf("plan.json is not a plan document: %w", err)
	}
	return doc, nil
}

func selfAudit(_ string, in inputs) ([]byte, error) {
	doc, err := decodePlan(in["plan.json"])
	if err != nil {
		return nil, err
	}
	steps := 0
	var empty []string
	var text strings.Builder
	for _, s := range doc.Sections {
		steps += len(s.Steps)
		if len(s.Steps) == 0 {
			empty = append(empty, s.Title)
		}
		text.WriteString(strings.ToLower(s.Title) + "\n")
		for _, st := range s.Steps {
			text.WriteString(strings.ToLower(st) + "\n")
		}
	}
	var missing []string
	for _, a := range bullets(in["assumptions.md"]) {
		for _, m := range quoted.FindAllStringSubmatch(a, -1) {
			if !strings.Contains(text.String(), strings.ToLower(m[1])) {
				missing = append(missing, m[1])
			}
		}
	}
	check := func(name string, ok bool, detail string) auditCheck {
		status := "fail"
		if ok {
			status = "pass"
		}
		return auditCheck{Name: name, Status: status, Detail: detail}
	}
	audit := auditDoc{
		Checks: []auditCheck{
			check("has_sections", len(doc.Sections) > 0, fmt.Sprintf("%d sections", len(doc.Sections))),
			check("sections_have_steps", len(empty) == 0, "without steps: "+strings.Join(empty, "; ")),
			check("assumptions_covered", len(missing) == 0, "not covered: "+strings.Join(missing, ", ")),
			check("has_title", doc.Title != "", "title: "+doc.Title),
		},
		Source: map[string]string{"plan.json": sha256Hex(in["plan.json"]), "assumptions.md": sha256Hex(in["assumptions.md"])},
		Plan:   map[string]float64{"sections": float64(len(doc.Sections)), "steps": float64(steps), "words": float64(doc.WordCount)},
	}
	for _, c := range audit.Checks {
		audit.Total++
		if c.Status == "pass" {
			audit.Passed++
		}
	}
	return marshalDoc(audit)
}

func writeValidationReport(_ string, in inputs) ([]byte, error) {
	var audit auditDoc
	if err := json.Unmarshal(in["audit.json"], &audit); err != nil {
		return nil, fmt.Errorf("audit.json is not an audit document: %w", err)
	}
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Validation report</title></head><body>\n")
	fmt.Fprintf(&b, "<h1>Validation report</h1>\n<p>%d of %d checks passed; plan.md has %d words.</p>\n",
		audit.Passed, audit.Total, len(words(body(in["plan.md"]))))
	b.WriteString("<table>\n<tr><th>check</th><th>status</th><th>detail</th></tr>\n")
	for _, c := range audit.Checks {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			html.EscapeString(c.Name), html.EscapeString(c.Status), html.EscapeString(c.Detail))
	}
	fmt.Fprintf(&b, "</table>\n%s%s -->\n</body></html>\n", sourcesPrefix,
		html.EscapeString(in.sources([]string{"audit.json", "plan.md"})))
	return []byte(b.String()), nil
}

func exportPlan(_ string, in inputs) ([]byte, error) {
	doc, err := decodePlan(in["plan.json"])
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head><body>\n<h1>%s</h1>\n",
		html.EscapeString(doc.Title), html.EscapeString(doc.Title))
	for _, s := range doc.Sections {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<ol>\n", html.EscapeString(s.Title))
		for _, st := range s.Steps {
			fmt.Fprintf(&b, "<li>%s</li>\n", html.EscapeString(st))
		}
		b.WriteString("</ol>\n")
	}
	fmt.Fprintf(&b, "%s%s -->\n</body></html>\n", sourcesPrefix,
		html.EscapeString(in.sources([]string{"plan.md", "plan.json"})))
	return []byte(b.String()), nil
}

func exportSummary(_ string, in inputs) ([]byte, error) {
	doc, err := decodePlan(in["plan.json"])
	if err != nil {
		return nil, err
	}
	var audit auditDoc
	if err := json.Unmarshal(in["audit.json"], &audit); err != nil {
		return nil, fmt.Errorf("audit.json is not an audit document: %w", err)
	}
	steps := 0
	for _, s := range doc.Sections {
		steps += len(s.Steps)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Summary: %s\n\n", doc.Title)
	fmt.Fprintf(&b, "- Sections: %d\n- Steps: %d\n- Words: %d\n- Audit: %s of %s checks passed\n",
		len(doc.Sections), steps, doc.WordCount, strconv.Itoa(audit.Passed), strconv.Itoa(audit.Total))
	fmt.Fprintf(&b, "\n%s%s -->\n", sourcesPrefix, in.sources([]string{"plan.json", "audit.json"}))
	return []byte(b.String()), nil
}
