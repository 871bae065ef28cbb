package contract

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// idea is what the cases plan unless they need something particular.
const idea = "Open a small bakery that sells sourdough bread and pastries in Lisbon, " +
	"with a weekend market stall and a bread subscription for the neighbourhood."

func (s *suite) cases() []testCase {
	return []testCase{
		{"CreateAndStatus", s.testCreateAndStatus},
		{"CreateIdempotentWithClientRequestID", s.testCreateIdempotent},
		{"UnknownSession", s.testUnknownSession},
		{"RunToCompletion", s.testRunToCompletion},
		{"Targets", s.testTargets},
		{"RunAlreadyActive", s.testRunAlreadyActive},
		{"InvalidTransitions", s.testInvalidTransitions},
		{"StartStopResumeLoop", s.testStartStopResumeLoop},
		{"ArtifactReadWriteLocking", s.testLocking},
		{"RunningReadonly", s.testRunningReadonly},
		{"StopEditResume", s.testStopEditResume},
		{"EditUpstreamThenResume", s.testEditUpstream},
		{"ResumeInvalidate", s.testResumeInvalidate},
		{"FailedRunIsResumable", s.testFailedRun},
		{"EventCursors", s.testEventCursors},
		{"RangeReads", s.testRangeReads},
		{"PathTraversal", s.testPathTraversal},
		{"ServerManagedArtifacts", s.testServerManaged},
		{"SeedArtifacts", s.testSeeds},
		{"ConcurrentSessionsAreDeterministic", s.testConcurrentSessions},
	}
}

func (s *suite) testCreateAndStatus(t *testing.T) {
	c := s.create(t, idea)
	if !strings.HasPrefix(c.SessionID, "pxe_") {
		t.Errorf("session_id %q does not start with pxe_", c.SessionID)
	}
	if want := "planexe://sessions/" + c.SessionID + "/out"; c.OutputDirURI != want {
		t.Errorf("output_dir_uri = %q, want %q", c.OutputDirURI, want)
	}
	if !validTime(c.CreatedAt) {
		t.Errorf("created_at %q is not RFC 3339", c.CreatedAt)
	}
	st := s.status(t, c.SessionID)
	if st.SessionID != c.SessionID || st.State != "created" || st.RunID != "" || st.Progress.Overall != 0 {
		t.Errorf("status of a new session = %+v, want state created, no run, progress 0", st)
	}
	if other := s.create(t, idea); other.SessionID == c.SessionID {
		t.Errorf("two creates returned the same session %s", c.SessionID)
	}
	s.refused(t, toolCreate, map[string]any{"idea": "  "}, codeInvalidArgument)
}

func (s *suite) testCreateIdempotent(t *testing.T) {
	key := fmt.Sprintf("contract-%d", time.Now().UnixNano())
	args := map[string]any{"idea": idea, "client_request_id": key,
		"config": map[string]any{"planner_model": "none", "max_runtime_sec": 600, "luigi": map[string]any{"workers": 1, "scheduler": "local"}}}
	var a, b createResp
	s.ok(t, toolCreate, args, &a)
	s.ok(t, toolCreate, args, &b)
	if a != b {
		t.Errorf("repeated create with client_request_id: %+v then %+v, want the same session", a, b)
	}
	args["idea"] = "something else"
	s.refused(t, toolCreate, args, codeConflict)
}

func (s *suite) testUnknownSession(t *testing.T) {
	ghost := "pxe_1999_01_01__deadbeef"
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{toolStatus, map[string]any{"session_id": ghost}},
		{toolStart, map[string]any{"session_id": ghost, "target": "build_plan"}},
		{toolStop, map[string]any{"session_id": ghost}},
		{toolResume, map[string]any{"session_id": ghost}},
		{toolEvents, map[string]any{"session_id": ghost}},
		{toolList, map[string]any{"session_id": ghost}},
		{toolRead, map[string]any{"artifact_uri": uri(ghost, "plan.md")}},
		{toolWrite, map[string]any{"artifact_uri": uri(ghost, "plan.md"), "content": "x"}},
	} {
		s.refused(t, tc.tool, tc.args, codeSessionNotFound)
	}
}

func (s *suite) testRunToCompletion(t *testing.T) {
	sid := s.create(t, idea).SessionID
	run := s.start(t, sid, "build_plan_and_validate")
	if run.RunID != "run_0001" {
		t.Errorf("first run_id = %q, want run_0001", run.RunID)
	}
	// Progress and phase only move forward while the run runs.
	lastPhase, lastOverall := 0, 0.0
	deadline := time.Now().Add(waitTimeout)
	var st statusResp
	for {
		st = s.status(t, sid)
		if st.RunID != run.RunID {
			t.Fatalf("status run_id = %q, want %q", st.RunID, run.RunID)
		}
		if i := slices.Index(phases(), st.Phase); i < lastPhase {
			t.Fatalf("phase went back to %s", st.Phase)
		} else {
			lastPhase = i
		}
		if st.Progress.Overall < lastOverall {
			t.Fatalf("progress.overall went back from %v to %v", lastOverall, st.Progress.Overall)
		}
		lastOverall = st.Progress.Overall
		if st.State != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still running after %v", waitTimeout)
		}
		time.Sleep(pollEvery)
	}
	if st.State != "completed" || st.Progress.Overall != 1 || st.Phase != "finalizing" {
		t.Fatalf("final status = state %s, overall %v, phase %s; want completed, 1, finalizing", st.State, st.Progress.Overall, st.Phase)
	}
	if len(st.LatestArtifacts) == 0 {
		t.Error("status has no latest_artifacts after a completed run")
	}
	for _, a := range st.LatestArtifacts {
		if a.ArtifactURI != uri(sid, a.Path) || a.Kind == "" || !validTime(a.UpdatedAt) {
			t.Errorf("bad latest_artifacts entry %+v", a)
		}
	}

	entries := s.list(t, sid, "")
	wantKind := map[string]string{"plan.md": "plan", "plan.json": "plan", "validation_report.html": "audit_report",
		"run.log": "log", "luigi_state.json": "state", "prompt.md": "intermediate"}
	for _, p := range append(outputsOf(taskNames()), "run.log", "luigi_state.json") {
		e, ok := entries[p]
		if !ok {
			t.Errorf("artifact %s missing after completion", p)
			continue
		}
		if k, ok := wantKind[p]; ok && e.Kind != k {
			t.Errorf("%s: kind %q, want %q", p, e.Kind, k)
		}
	}
	wantType := map[string]string{".md": "text/markdown", ".html": "text/html", ".json": "application/json"}
	for p, e := range entries {
		if e.Type != "file" || e.Size == nil || e.SHA256 == "" || !validTime(e.UpdatedAt) || e.ArtifactURI != uri(sid, p) {
			t.Errorf("%s: incomplete entry %+v", p, e)
			continue
		}
		r := s.read(t, e.ArtifactURI)
		if got := sha256Hex([]byte(r.Content)); got != r.SHA256 || got != e.SHA256 {
			t.Errorf("%s: sha256 of content %s, read says %s, list says %s", p, got, r.SHA256, e.SHA256)
		}
		if int64(len(r.Content)) != *e.Size {
			t.Errorf("%s: %d bytes read, list says %d", p, len(r.Content), *e.Size)
		}
		for ext, ct := range wantType {
			if strings.HasSuffix(p, ext) && (r.ContentType != ct || e.ContentType != ct) {
				t.Errorf("%s: content_type %q (list %q), want %q", p, r.ContentType, e.ContentType, ct)
			}
		}
	}

	evs, _ := s.events(t, sid, "")
	seen := map[string]bool{}
	var phaseOrder []string
	for _, e := range evs {
		seen[e.Type] = true
		if e.Type == "phase_changed" {
			phaseOrder = append(phaseOrder, fmt.Sprint(e.Data["phase"]))
		}
	}
	for _, typ := range []string{"run_started", "phase_changed", "task_started", "task_completed", "artifact_created", "progress_updated", "run_completed", "log"} {
		if !seen[typ] {
			t.Errorf("no %s event in a full run", typ)
		}
	}
	if !slices.Equal(phaseOrder, phases()) {
		t.Errorf("phase_changed sequence %v, want %v", phaseOrder, phases())
	}
	if got := started(evs, run.RunID); !slices.Equal(got, taskNames()) {
		t.Errorf("tasks started %v, want %v", got, taskNames())
	}
}

func (s *suite) testTargets(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan")
	before := s.list(t, sid, "")
	planOutputs := []string{"prompt.md", "assumptions.md", "outline.md", "plan.md", "plan.json", "plan.html"}
	for _, p := range planOutputs {
		if _, ok := before[p]; !ok {
			t.Errorf("build_plan did not produce %s", p)
		}
	}
	for _, p := range []string{"audit.json", "validation_report.html", "summary.md"} {
		if _, ok := before[p]; ok {
			t.Errorf("build_plan produced %s, which only validation needs", p)
		}
	}
	_, cursor := s.events(t, sid, "")
	run := s.resume(t, sid, map[string]any{"target": "validate_plan"})
	s.waitState(t, sid, "completed")
	evs, _ := s.events(t, sid, cursor)
	if got, want := started(evs, run.RunID), []string{"SelfAudit", "WriteValidationReport"}; !sameSet(got, want) {
		t.Errorf("validate_plan after build_plan ran %v, want only %v", got, want)
	}
	after := s.list(t, sid, "")
	for _, p := range planOutputs {
		if after[p].SHA256 != before[p].SHA256 {
			t.Errorf("%s changed although it was up to date", p)
		}
	}
	if after["validation_report.html"].Kind != "audit_report" {
		t.Errorf("validate_plan: no audit_report validation_report.html (%+v)", after["validation_report.html"])
	}
	fresh := s.create(t, idea).SessionID
	s.refused(t, toolStart, map[string]any{"session_id": fresh, "target": "build_everything"}, codeInvalidTarget)
	s.refused(t, toolResume, map[string]any{"session_id": sid, "target": "build_everything"}, codeInvalidTarget)
	if st := s.status(t, fresh); st.State != "created" {
		t.Errorf("a refused start changed the session: state %s", st.State)
	}
}

func (s *suite) testRunAlreadyActive(t *testing.T) {
	s.whileRunning(t, idea, func(sid, runID string) bool {
		for _, tool := range []string{toolStart, toolResume} {
			code, details, res := s.attempt(t, tool, map[string]any{"session_id": sid, "target": "build_plan_and_validate"})
			switch {
			case code == codeRunAlreadyActive:
				if details["run_id"] != runID {
					t.Errorf("%s: RUN_ALREADY_ACTIVE details.run_id = %v, want %s", tool, details["run_id"], runID)
				}
			case !s.stillRunning(t, sid):
				return true
			default:
				t.Fatalf("%s while %s runs: %s, want RUN_ALREADY_ACTIVE", tool, runID, res.Structured)
			}
		}
		if st := s.status(t, sid); st.RunID != runID {
			t.Errorf("a refused call started %s", st.RunID)
		}
		return false
	})
}

func (s *suite) testInvalidTransitions(t *testing.T) {
	sid := s.create(t, idea).SessionID
	// created: nothing to stop or resume.
	s.refused(t, toolStop, map[string]any{"session_id": sid}, codeRunNotActive)
	s.refused(t, toolStop, map[string]any{"session_id": sid, "run_id": "run_0001"}, codeRunNotFound)
	s.refused(t, toolResume, map[string]any{"session_id": sid}, codeRunNotFound)

	s.start(t, sid, "build_plan")
	s.waitState(t, sid, "completed")
	// completed → running is invalid (§5.3); a new run comes from resume.
	d := s.refused(t, toolStart, map[string]any{"session_id": sid, "target": "build_plan"}, codeConflict)
	if d["run_id"] != "run_0001" {
		t.Errorf("CONFLICT details.run_id = %v, want run_0001", d["run_id"])
	}
	s.refused(t, toolStop, map[string]any{"session_id": sid}, codeRunNotActive)
	s.refused(t, toolStop, map[string]any{"session_id": sid, "run_id": "run_0001"}, codeRunNotActive)
	s.refused(t, toolStop, map[string]any{"session_id": sid, "run_id": "run_0042"}, codeRunNotFound)
	s.refused(t, toolStop, map[string]any{"session_id": sid, "mode": "sideways"}, codeInvalidArgument)
	s.refused(t, toolResume, map[string]any{"session_id": sid, "resume_policy": "rebuild_the_world"}, codeInvalidArgument)
	s.refused(t, toolResume, map[string]any{"session_id": sid, "invalidate": map[string]any{"tasks": []any{"NoSuchTask"}}}, codeInvalidTarget)
	if st := s.status(t, sid); st.RunID != "run_0001" || st.State != "completed" {
		t.Errorf("refused transitions changed the session: %s %s", st.RunID, st.State)
	}
}

func (s *suite) testStartStopResumeLoop(t *testing.T) {
	reference := s.runToCompletion(t, idea, "build_plan_and_validate")
	for range 3 {
		if s.stopResumeLoop(t, reference) {
			return
		}
	}
	t.Fatal("no stop ever found the run still running; launch the server with a longer task delay")
}

// stopResumeLoop stops and resumes one session up to four times, then lets
// it finish, and checks the result against the uninterrupted reference run.
// It returns false if not even the first stop found the run running.
func (s *suite) stopResumeLoop(t *testing.T, reference string) bool {
	sid := s.create(t, idea).SessionID
	current := s.start(t, sid, "build_plan_and_validate").RunID
	runs := []string{current}
	stops := 0
	for i := range 4 {
		mode := []string{"graceful", "immediate"}[i%2]
		before := s.list(t, sid, "")
		code, _, res := s.attempt(t, toolStop, map[string]any{"session_id": sid, "run_id": current, "mode": mode})
		if code == codeRunNotActive && s.status(t, sid).State == "completed" {
			break // the run finished first; the rest of the loop has nothing to stop
		}
		if code != "" {
			t.Fatalf("stop %s (%s): %s", current, mode, res.Structured)
		}
		var stop struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal(res.Structured, &stop)
		if stop.State != "stopped" {
			t.Fatalf("stop %s: state %q, want stopped", current, stop.State)
		}
		stops++
		if st := s.status(t, sid); st.State != "stopped" || st.RunID != current {
			t.Fatalf("after stop: status %s %s, want %s stopped", st.RunID, st.State, current)
		}
		after := s.list(t, sid, "")
		for p := range before {
			if _, ok := after[p]; !ok {
				t.Errorf("stop deleted %s", p)
			}
		}
		if i == 0 {
			// stopped → running goes through resume only.
			s.refused(t, toolStart, map[string]any{"session_id": sid, "target": "build_plan_and_validate"}, codeConflict)
		}
		r := s.resume(t, sid, map[string]any{"target": "build_plan_and_validate", "resume_policy": "luigi_up_to_date"})
		if want := fmt.Sprintf("run_%04d", len(runs)+1); r.RunID != want {
			t.Fatalf("resume: run_id %q, want %q", r.RunID, want)
		}
		runs = append(runs, r.RunID)
		current = r.RunID
	}
	if stops == 0 {
		return false
	}
	s.waitState(t, sid, "completed")
	// Incremental: with no edit in between, every task completed exactly
	// once across all the runs; no stop threw finished work away.
	evs, _ := s.events(t, sid, "")
	completed := map[string]int{}
	for _, e := range evs {
		if e.Type == "task_completed" {
			completed[fmt.Sprint(e.Data["task"])]++
		}
	}
	for _, name := range taskNames() {
		if completed[name] != 1 {
			t.Errorf("task %s completed %d times over runs %v, want once", name, completed[name], runs)
		}
	}
	// Deterministic (§17.2): the interrupted session ends with the same
	// bytes as the uninterrupted one.
	got, want := s.list(t, sid, ""), s.list(t, reference, "")
	for _, p := range outputsOf(taskNames()) {
		if got[p].SHA256 != want[p].SHA256 {
			t.Errorf("%s after stop/resume differs from an uninterrupted run", p)
		}
	}
	return true
}

// testStopEditResume is the flow of §15: stop, read, write, resume, and only
// what the edit invalidated is recomputed.
func (s *suite) testStopEditResume(t *testing.T) {
	sid := s.create(t, idea).SessionID
	run1 := s.start(t, sid, "build_plan_and_validate")
	deadline := time.Now().Add(waitTimeout)
	for {
		if _, ok := s.list(t, sid, "")["plan.md"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plan.md not produced after %v", waitTimeout)
		}
		time.Sleep(pollEvery)
	}
	code, _, res := s.attempt(t, toolStop, map[string]any{"session_id": sid, "run_id": run1.RunID, "mode": "graceful"})
	switch st := s.status(t, sid); {
	case code == "" && st.State == "stopped":
	case code == codeRunNotActive && st.State == "completed":
		// The run finished before the stop arrived; edit and resume
		// must behave the same from there.
	default:
		t.Fatalf("stop: %s, then status %s", res.Structured, st.State)
	}
	before := s.list(t, sid, "")
	r := s.read(t, uri(sid, "plan.md"))
	edited := r.Content + "\n## Marker section zebra\n\n1. Feed the zebra.\n"
	w := s.write(t, uri(sid, "plan.md"), edited, r.SHA256)
	_, cursor := s.events(t, sid, "")
	run2 := s.resume(t, sid, map[string]any{"target": "build_plan_and_validate", "resume_policy": "luigi_up_to_date",
		"invalidate": map[string]any{"artifacts": []any{}, "tasks": []any{}}})
	if run2.RunID != "run_0002" {
		t.Errorf("resume run_id %q, want run_0002", run2.RunID)
	}
	s.waitState(t, sid, "completed")
	evs, _ := s.events(t, sid, cursor)
	if got, want := started(evs, run2.RunID), dependents("plan.md"); !sameSet(got, want) {
		t.Errorf("resume after editing plan.md ran %v, want exactly the tasks downstream of it %v", got, want)
	}
	after := s.list(t, sid, "")
	for _, p := range []string{"prompt.md", "assumptions.md", "outline.md"} {
		if after[p].SHA256 != before[p].SHA256 || after[p].UpdatedAt != before[p].UpdatedAt {
			t.Errorf("%s was rewritten although it does not depend on plan.md", p)
		}
	}
	if after["plan.md"].SHA256 != w.SHA256 {
		t.Errorf("plan.md was regenerated over the edit")
	}
	for _, p := range []string{"plan.json", "plan.html"} {
		if c := s.read(t, uri(sid, p)).Content; !strings.Contains(c, "Marker section zebra") {
			t.Errorf("%s does not reflect the edit of plan.md", p)
		}
	}
	for _, p := range outputsOf(dependents("plan.md")) {
		if b, ok := before[p]; ok && after[p].SHA256 == b.SHA256 {
			t.Errorf("%s depends on plan.md but did not change", p)
		}
	}
}

func (s *suite) testEditUpstream(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan_and_validate")
	before := s.list(t, sid, "")
	r := s.read(t, uri(sid, "assumptions.md"))
	edited := strings.Replace(r.Content, "\n- The idea", "\n- The plan is about \"zebra\".\n- The idea", 1)
	if edited == r.Content {
		t.Fatalf("assumptions.md has no line to edit: %q", r.Content)
	}
	s.write(t, uri(sid, "assumptions.md"), edited, r.SHA256)
	_, cursor := s.events(t, sid, "")
	run := s.resume(t, sid, nil)
	s.waitState(t, sid, "completed")
	evs, _ := s.events(t, sid, cursor)
	if got, want := started(evs, run.RunID), dependents("assumptions.md"); !sameSet(got, want) {
		t.Errorf("resume after editing assumptions.md ran %v, want %v", got, want)
	}
	if after := s.list(t, sid, ""); after["prompt.md"].SHA256 != before["prompt.md"].SHA256 {
		t.Error("prompt.md changed although it is upstream of the edit")
	}
	for _, p := range []string{"outline.md", "plan.md"} {
		if !strings.Contains(s.read(t, uri(sid, p)).Content, "zebra") {
			t.Errorf("%s does not carry the new assumption", p)
		}
	}
}

func (s *suite) testResumeInvalidate(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan_and_validate")
	before := s.list(t, sid, "")
	for _, tc := range []struct {
		name       string
		invalidate map[string]any
		want       []string
	}{
		{"Artifact", map[string]any{"artifacts": []any{uri(sid, "outline.md")}, "tasks": []any{}}, dependents("outline.md")},
		{"Task", map[string]any{"tasks": []any{"SelfAudit"}}, []string{"SelfAudit", "WriteValidationReport", "ExportSummary"}},
		{"Nothing", nil, nil},
	} {
		_, cursor := s.events(t, sid, "")
		args := map[string]any{}
		if tc.invalidate != nil {
			args["invalidate"] = tc.invalidate
		}
		run := s.resume(t, sid, args)
		s.waitState(t, sid, "completed")
		evs, _ := s.events(t, sid, cursor)
		if got := started(evs, run.RunID); !sameSet(got, tc.want) {
			t.Errorf("%s: resume ran %v, want %v", tc.name, got, tc.want)
		}
	}
	// Recomputing from unchanged inputs gives the same bytes.
	after := s.list(t, sid, "")
	for _, p := range outputsOf(taskNames()) {
		if after[p].SHA256 != before[p].SHA256 {
			t.Errorf("%s changed when recomputed from the same inputs", p)
		}
	}
	s.refused(t, toolResume, map[string]any{"session_id": sid, "invalidate": map[string]any{"artifacts": []any{uri(sid, "nope.md")}}}, codeInvalidArtifactURI)
	s.refused(t, toolResume, map[string]any{"session_id": sid, "invalidate": map[string]any{"artifacts": []any{"../outline.md"}}}, codeInvalidArtifactURI)
}

func (s *suite) testFailedRun(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan")
	pj := s.read(t, uri(sid, "plan.json"))
	s.write(t, uri(sid, "plan.json"), "this is not a plan\n", pj.SHA256)
	run2 := s.resume(t, sid, map[string]any{"target": "validate_plan"})
	if st := s.waitState(t, sid, "completed", "failed"); st.State != "failed" || st.RunID != run2.RunID {
		t.Fatalf("run over a broken plan.json ended %s %s, want %s failed", st.RunID, st.State, run2.RunID)
	}
	e, ok := s.list(t, sid, "")["run_error.json"]
	if !ok || e.Kind != "log" {
		t.Fatalf("no run_error.json log artifact after a failure (%+v)", e)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(s.read(t, e.ArtifactURI).Content), &doc); err != nil || !strings.Contains(fmt.Sprint(doc), "SelfAudit") {
		t.Errorf("run_error.json = %v (%v), want a JSON report naming SelfAudit", doc, err)
	}
	evs, _ := s.events(t, sid, "")
	if !slices.ContainsFunc(evs, func(e event) bool { return e.Type == "run_failed" && e.Data["run_id"] == run2.RunID }) {
		t.Error("no run_failed event")
	}
	// failed is resumable: regenerate plan.json and go on.
	s.resume(t, sid, map[string]any{"invalidate": map[string]any{"tasks": []any{"StructurePlan"}}})
	s.waitState(t, sid, "completed")
	if got := s.read(t, uri(sid, "plan.json")); got.SHA256 != pj.SHA256 {
		t.Error("regenerated plan.json differs from the original")
	}
}

func (s *suite) testConcurrentSessions(t *testing.T) {
	var sids []string
	for range 4 {
		sid := s.create(t, idea).SessionID
		s.start(t, sid, "build_plan_and_validate")
		sids = append(sids, sid)
	}
	var first map[string]entry
	for _, sid := range sids {
		s.waitState(t, sid, "completed")
		entries := s.list(t, sid, "")
		if first == nil {
			first = entries
			continue
		}
		for _, p := range outputsOf(taskNames()) {
			if entries[p].SHA256 != first[p].SHA256 {
				t.Errorf("%s differs between concurrent sessions of the same idea", p)
			}
		}
	}
}
