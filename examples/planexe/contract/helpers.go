package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tool names of spec §6 and §7.1.
const (
	toolCreate = "planexe.session.create"
	toolStart  = "planexe.session.start"
	toolStatus = "planexe.session.status"
	toolStop   = "planexe.session.stop"
	toolResume = "planexe.session.resume"
	toolEvents = "planexe.session.events"
	toolList   = "planexe.artifact.list"
	toolRead   = "planexe.artifact.read"
	toolWrite  = "planexe.artifact.write"
)

// The error codes of spec §11.1 the suite expects, and the server's one
// extension for malformed requests.
const (
	codeSessionNotFound    = "SESSION_NOT_FOUND"
	codeRunNotFound        = "RUN_NOT_FOUND"
	codeRunAlreadyActive   = "RUN_ALREADY_ACTIVE"
	codeRunNotActive       = "RUN_NOT_ACTIVE"
	codeInvalidTarget      = "INVALID_TARGET"
	codeInvalidArtifactURI = "INVALID_ARTIFACT_URI"
	codeConflict           = "CONFLICT"
	codePermissionDenied   = "PERMISSION_DENIED"
	codeRunningReadonly    = "RUNNING_READONLY"
	codeInvalidArgument    = "INVALID_ARGUMENT"
)

// Wire shapes, decoded independently of the server's own types.

type createResp struct {
	SessionID    string `json:"session_id"`
	OutputDirURI string `json:"output_dir_uri"`
	CreatedAt    string `json:"created_at"`
}

type runResp struct {
	RunID string `json:"run_id"`
	State string `json:"state"`
}

type statusResp struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	State     string `json:"state"`
	Phase     string `json:"phase"`
	Progress  struct {
		Overall     float64 `json:"overall"`
		CurrentTask *struct {
			Name string  `json:"name"`
			Pct  float64 `json:"pct"`
		} `json:"current_task"`
	} `json:"progress"`
	Timing *struct {
		StartedAt  string  `json:"started_at"`
		ElapsedSec float64 `json:"elapsed_sec"`
	} `json:"timing"`
	LatestArtifacts []struct {
		Path        string `json:"path"`
		ArtifactURI string `json:"artifact_uri"`
		Kind        string `json:"kind"`
		UpdatedAt   string `json:"updated_at"`
	} `json:"latest_artifacts"`
	Warnings []string `json:"warnings"`
}

type entry struct {
	Type        string `json:"type"`
	Path        string `json:"path"`
	ArtifactURI string `json:"artifact_uri"`
	Size        *int64 `json:"size"`
	UpdatedAt   string `json:"updated_at"`
	ContentType string `json:"content_type"`
	Kind        string `json:"kind"`
	SHA256      string `json:"sha256"`
}

type readResp struct {
	ArtifactURI     string `json:"artifact_uri"`
	ContentType     string `json:"content_type"`
	SHA256          string `json:"sha256"`
	Content         string `json:"content"`
	ContentEncoding string `json:"content_encoding"`
	Size            int64  `json:"size"`
	EOF             bool   `json:"eof"`
}

type writeResp struct {
	Updated   bool   `json:"updated"`
	SHA256    string `json:"sha256"`
	UpdatedAt string `json:"updated_at"`
}

type event struct {
	Cursor string         `json:"cursor"`
	TS     string         `json:"ts"`
	Type   string         `json:"type"`
	Data   map[string]any `json:"data"`
}

type eventsResp struct {
	Cursor  string  `json:"cursor"`
	Events  []event `json:"events"`
	HasMore bool    `json:"has_more"`
}

// task is a node of the stand-in planner's DAG.
type task struct {
	name, output string
	inputs       []string
}

// dag returns the stand-in planner's tasks in execution order. It is a
// function, not a package variable, so no test can change another's copy.
func dag() []task {
	return []task{
		{"SetupPrompt", "prompt.md", nil},
		{"ExtractAssumptions", "assumptions.md", []string{"prompt.md"}},
		{"DraftOutline", "outline.md", []string{"prompt.md", "assumptions.md"}},
		{"WriteDetailedPlan", "plan.md", []string{"outline.md", "assumptions.md"}},
		{"StructurePlan", "plan.json", []string{"plan.md"}},
		{"SelfAudit", "audit.json", []string{"plan.json", "assumptions.md"}},
		{"WriteValidationReport", "validation_report.html", []string{"audit.json", "plan.md"}},
		{"ExportPlan", "plan.html", []string{"plan.md", "plan.json"}},
		{"ExportSummary", "summary.md", []string{"plan.json", "audit.json"}},
	}
}

// dependents returns the tasks that consume path, directly or transitively.
func dependents(path string) []string {
	stale := map[string]bool{path: true}
	var out []string
	for _, t := range dag() {
		for _, in := range t.inputs {
			if stale[in] {
				stale[t.output] = true
				out = append(out, t.name)
				break
			}
		}
	}
	return out
}

// taskNames returns the names of all tasks, or of those whose output is in
// outputs.
func taskNames(outputs ...string) []string {
	var out []string
	for _, t := range dag() {
		if len(outputs) == 0 || slices.Contains(outputs, t.output) {
			out = append(out, t.name)
		}
	}
	return out
}

func outputsOf(names []string) []string {
	var out []string
	for _, t := range dag() {
		if slices.Contains(names, t.name) {
			out = append(out, t.output)
		}
	}
	return out
}

func phases() []string {
	return []string{"initializing", "generating_plan", "validating", "exporting", "finalizing"}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *suite) create(t *testing.T, idea string) createResp {
	t.Helper()
	var r createResp
	s.ok(t, toolCreate, map[string]any{"idea": idea}, &r, "session_id", "output_dir_uri", "created_at")
	return r
}

func uri(sessionID, path string) string {
	return "planexe://sessions/" + sessionID + "/out/" + path
}

func (s *suite) start(t *testing.T, sid, target string) runResp {
	t.Helper()
	var r runResp
	s.ok(t, toolStart, map[string]any{"session_id": sid, "target": target}, &r, "run_id", "state")
	if r.State != "running" {
		t.Fatalf("start: state %q, want running", r.State)
	}
	return r
}

func (s *suite) resume(t *testing.T, sid string, args map[string]any) runResp {
	t.Helper()
	a := map[string]any{"session_id": sid}
	for k, v := range args {
		a[k] = v
	}
	var r runResp
	s.ok(t, toolResume, a, &r, "run_id", "state")
	if r.State != "running" {
		t.Fatalf("resume: state %q, want running", r.State)
	}
	return r
}

// status fetches the status and checks the invariants of §6.3 that hold at
// any moment.
func (s *suite) status(t *testing.T, sid string) statusResp {
	t.Helper()
	var st statusResp
	s.ok(t, toolStatus, map[string]any{"session_id": sid}, &st, "session_id", "state", "progress", "latest_artifacts", "warnings")
	if st.Progress.Overall < 0 || st.Progress.Overall > 1 {
		t.Fatalf("status: progress.overall %v outside [0,1]", st.Progress.Overall)
	}
	if st.RunID != "" {
		if !slices.Contains(phases(), st.Phase) {
			t.Fatalf("status: phase %q is not one of %v", st.Phase, phases())
		}
		if st.Timing == nil || !validTime(st.Timing.StartedAt) || st.Timing.ElapsedSec < 0 {
			t.Fatalf("status: bad timing %+v", st.Timing)
		}
	}
	if cur := st.Progress.CurrentTask; cur != nil && (cur.Pct < 0 || cur.Pct > 1 || cur.Name == "") {
		t.Fatalf("status: bad current_task %+v", *cur)
	}
	return st
}

// waitState polls status until the run is in one of states.
func (s *suite) waitState(t *testing.T, sid string, states ...string) statusResp {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		st := s.status(t, sid)
		if slices.Contains(states, st.State) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: state still %q (run %s, phase %s) after %v, want one of %v", sid, st.State, st.RunID, st.Phase, waitTimeout, states)
		}
		time.Sleep(pollEvery)
	}
}

// runToCompletion creates a session and runs target to completion.
func (s *suite) runToCompletion(t *testing.T, idea, target string) string {
	t.Helper()
	sid := s.create(t, idea).SessionID
	s.start(t, sid, target)
	if st := s.waitState(t, sid, "completed", "failed"); st.State != "completed" {
		t.Fatalf("run ended %s, want completed", st.State)
	}
	return sid
}

func (s *suite) list(t *testing.T, sid, path string) map[string]entry {
	t.Helper()
	var r struct {
		Entries []entry `json:"entries"`
	}
	s.ok(t, toolList, map[string]any{"session_id": sid, "path": path, "include_metadata": true}, &r, "entries")
	out := make(map[string]entry)
	for _, e := range r.Entries {
		out[e.Path] = e
	}
	return out
}

func (s *suite) read(t *testing.T, u string) readResp {
	t.Helper()
	var r readResp
	s.ok(t, toolRead, map[string]any{"artifact_uri": u}, &r, "artifact_uri", "content_type", "sha256", "content")
	return r
}

func (s *suite) write(t *testing.T, u, content, expected string) writeResp {
	t.Helper()
	args := map[string]any{"artifact_uri": u, "content": content, "edit_reason": "user_patch"}
	if expected != "" {
		args["lock"] = map[string]any{"expected_sha256": expected}
	}
	var r writeResp
	s.ok(t, toolWrite, args, &r, "updated", "sha256", "updated_at")
	return r
}

// events returns every event after since, following has_more.
func (s *suite) events(t *testing.T, sid, since string) ([]event, string) {
	t.Helper()
	var all []event
	for {
		var r eventsResp
		s.ok(t, toolEvents, map[string]any{"session_id": sid, "since": since}, &r, "cursor", "events")
		all = append(all, r.Events...)
		since = r.Cursor
		if !r.HasMore {
			return all, since
		}
	}
}

// started returns the tasks for which run emitted task_started.
func started(evs []event, run string) []string {
	var out []string
	for _, e := range evs {
		if e.Type == "task_started" && e.Data["run_id"] == run {
			out = append(out, fmt.Sprint(e.Data["task"]))
		}
	}
	return out
}

func cursorNumber(t *testing.T, c string) int64 {
	t.Helper()
	n, ok := strings.CutPrefix(c, "cursor_")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil {
		t.Fatalf("cursor %q is not cursor_<n>", c)
	}
	return v
}

func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// whileRunning starts target on a fresh session and calls attempt while the
// run should still be running. attempt reports raced == true when it found
// the run already ended (the call it made could not observe a running run);
// whileRunning then tries again on a new session. A server that is wrong
// fails inside attempt; a server too fast for the suite fails here.
func (s *suite) whileRunning(t *testing.T, idea string, attempt func(sid, runID string) (raced bool)) {
	t.Helper()
	for range 5 {
		sid := s.create(t, idea).SessionID
		run := s.start(t, sid, "build_plan_and_validate")
		raced := attempt(sid, run.RunID)
		// Leave nothing running behind: a case must not load the server
		// for the others.
		if code, _, _ := s.attempt(t, toolStop, map[string]any{"session_id": sid, "mode": "immediate"}); code != "" && code != codeRunNotActive {
			t.Fatalf("cleanup stop: %s", code)
		}
		if !raced {
			return
		}
		t.Logf("run %s of %s ended before it could be observed running; retrying on a new session", run.RunID, sid)
	}
	t.Fatal("every run finished before the suite could observe it running; launch the server with a longer task delay")
}

// stillRunning reports whether the session's latest run is running; a
// case calls it after an unexpected answer to tell a race from a bug.
func (s *suite) stillRunning(t *testing.T, sid string) bool {
	t.Helper()
	return s.status(t, sid).State == "running"
}
