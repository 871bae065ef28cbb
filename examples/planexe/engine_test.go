package planexe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testIdea = "Open a small bakery that sells sourdough bread in Lisbon, with a bread subscription."

// forever is a task delay no test waits out: runs stay running until a test
// stops them (an immediate stop or Close interrupts the delay at once).
const forever = time.Hour

func newTestEngine(t *testing.T, opts Options) *Engine {
	t.Helper()
	return openTestEngine(t, t.TempDir(), opts)
}

func openTestEngine(t *testing.T, root string, opts Options) *Engine {
	t.Helper()
	e, err := NewEngine(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

func mustCreate(t *testing.T, e *Engine, user string) string {
	t.Helper()
	c, err := e.Create(context.Background(), user, CreateRequest{Idea: testIdea})
	if err != nil {
		t.Fatal(err)
	}
	return c.SessionID
}

func mustStart(t *testing.T, e *Engine, sid, target string) {
	t.Helper()
	if _, err := e.Start(context.Background(), "", StartRequest{SessionID: sid, Target: target}); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("got %v, want success", err)
		}
		return
	}
	if got := ErrorCode(err); err == nil || got != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func status(t *testing.T, e *Engine, sid string) StatusResponse {
	t.Helper()
	st, err := e.Status(context.Background(), "", StatusRequest{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitState(t *testing.T, e *Engine, sid string, state string) StatusResponse {
	t.Helper()
	var st StatusResponse
	waitFor(t, "state "+state, func() bool { st = status(t, e, sid); return st.State == state })
	return st
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"plan.md", true},
		{"notes/a-b_c.1.md", true},
		{"a/b/c/d.json", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../b", false},
		{"./x", false},
		{"a/./x", false},
		{"a//b", false},
		{"a/", false},
		{".hidden", false},
		{"a/.tmp-1", false},
		{`a\b`, false},
		{`..\x`, false},
		{"%2e%2e/x", false},
		{"a%2fb", false},
		{"a b.md", false},
		{"ä.md", false},
		{"a\x00b", false},
		{"C:x", false},
		{"x?y", false},
		{strings.Repeat("a", 256), false},
		{strings.Repeat("a/", 16) + "b", false},
	} {
		if reason := checkPath(tc.path); (reason == "") != tc.ok {
			t.Errorf("checkPath(%q) = %q, want ok %v", tc.path, reason, tc.ok)
		}
	}
}

func TestParseArtifactURI(t *testing.T) {
	const sid = "pxe_2026_01_14__abcd1234"
	for _, tc := range []struct {
		uri, sid, rel string // sid "" means refused
	}{
		{"planexe://sessions/" + sid + "/out/plan.md", sid, "plan.md"},
		{"planexe://sessions/" + sid + "/out/notes/a.md", sid, "notes/a.md"},
		{"planexe://sessions/other_id/out/plan.md", "other_id", "plan.md"},
		{"planexe://sessions/" + sid + "/out", "", ""},
		{"planexe://sessions/" + sid + "/out/", "", ""},
		{"planexe://sessions/" + sid + "/plan.md", "", ""},
		{"planexe://sessions/" + sid + "/out/../session.json", "", ""},
		{"planexe://sessions/" + sid + "/out/%2e%2e/session.json", "", ""},
		{"planexe://sessions/../out/plan.md", "", ""},
		{"planexe://sessions/a%2fb/out/plan.md", "", ""},
		{"planexe://sessions//out/plan.md", "", ""},
		{"planexe:/sessions/" + sid + "/out/plan.md", "", ""},
		{"PLANEXE://sessions/" + sid + "/out/plan.md", "", ""},
		{"file:///etc/passwd", "", ""},
		{"plan.md", "", ""},
	} {
		gotSID, gotRel, err := parseArtifactURI(tc.uri)
		if tc.sid == "" {
			if ErrorCode(err) != CodeInvalidArtifactURI {
				t.Errorf("parseArtifactURI(%q) = %q, %q, %v; want INVALID_ARTIFACT_URI", tc.uri, gotSID, gotRel, err)
			}
			continue
		}
		if err != nil || gotSID != tc.sid || gotRel != tc.rel {
			t.Errorf("parseArtifactURI(%q) = %q, %q, %v; want %q, %q", tc.uri, gotSID, gotRel, err, tc.sid, tc.rel)
		}
	}
}

func names(ts []*task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestPipelineGraph(t *testing.T) {
	p := newPipeline()
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{TargetBuildPlan, []string{"SetupPrompt", "ExtractAssumptions", "DraftOutline", "WriteDetailedPlan", "StructurePlan", "ExportPlan"}},
		{TargetValidatePlan, []string{"SetupPrompt", "ExtractAssumptions", "DraftOutline", "WriteDetailedPlan", "StructurePlan", "SelfAudit", "WriteValidationReport"}},
		{TargetBuildPlanAndValidate, names(p.tasks)},
	} {
		if diff := cmp.Diff(tc.want, names(p.plan(tc.target))); diff != "" {
			t.Errorf("plan(%s) (-want +got):\n%s", tc.target, diff)
		}
	}
	for _, tc := range []struct {
		artifact string
		want     []string
	}{
		{"prompt.md", []string{"DraftOutline", "ExportPlan", "ExportSummary", "ExtractAssumptions", "SelfAudit", "StructurePlan", "WriteDetailedPlan", "WriteValidationReport"}},
		{"plan.md", []string{"ExportPlan", "ExportSummary", "SelfAudit", "StructurePlan", "WriteValidationReport"}},
		{"audit.json", []string{"ExportSummary", "WriteValidationReport"}},
		{"summary.md", nil},
		{"notes.md", nil},
	} {
		got := sortedKeys(p.dependents([]string{tc.artifact}))
		if len(got) == 0 {
			got = nil
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("dependents(%s) (-want +got):\n%s", tc.artifact, diff)
		}
	}
	if diff := cmp.Diff([]string{"ExportSummary", "SelfAudit", "WriteValidationReport"}, sortedKeys(p.downstream([]string{"SelfAudit"}))); diff != "" {
		t.Errorf("downstream(SelfAudit) (-want +got):\n%s", diff)
	}
	// Every input is some earlier task's output, so the order is topological.
	seen := map[string]bool{}
	for _, tk := range p.tasks {
		for _, in := range tk.Inputs {
			if !seen[in] {
				t.Errorf("%s reads %s before it is produced", tk.Name, in)
			}
		}
		seen[tk.Output] = true
	}
}

// produceAll runs the whole pipeline in memory.
func produceAll(t *testing.T, idea string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, tk := range newPipeline().tasks {
		in := inputs{}
		for _, p := range tk.Inputs {
			in[p] = files[p]
		}
		out, err := tk.produce(idea, in)
		if err != nil {
			t.Fatalf("%s: %v", tk.Name, err)
		}
		files[tk.Output] = out
	}
	return files
}

// TestTasksDependOnTheirInputs checks what makes invalidation real: the
// same inputs give the same bytes, and changing any one input of a task
// changes its output.
func TestTasksDependOnTheirInputs(t *testing.T) {
	files := produceAll(t, testIdea)
	if diff := cmp.Diff(files, produceAll(t, testIdea)); diff != "" {
		t.Fatalf("the pipeline is not deterministic:\n%s", diff)
	}
	for _, tk := range newPipeline().tasks {
		in := inputs{}
		for _, p := range tk.Inputs {
			in[p] = files[p]
		}
		base, _ := tk.produce(testIdea, in)
		for _, p := range tk.Inputs {
			changed := inputs{}
			for k, v := range in {
				changed[k] = v
			}
			changed[p] = editedCopy(p, in[p])
			out, err := tk.produce(testIdea, changed)
			if err != nil {
				t.Errorf("%s with edited %s: %v", tk.Name, p, err)
				continue
			}
			if string(out) == string(base) {
				t.Errorf("%s does not change when %s changes", tk.Name, p)
			}
		}
	}
}

// editedCopy returns a different but still well-formed version of an
// artifact.
func editedCopy(path string, b []byte) []byte {
	if strings.HasSuffix(path, ".json") {
		var v map[string]any
		if json.Unmarshal(b, &v) == nil {
			v["edited"] = true
			out, _ := json.Marshal(v)
			return out
		}
	}
	return append(append([]byte{}, b...), "\n- The plan is about \"edits\".\n## Extra\n\n1. More.\n"...)
}

// TestStateMachine checks every operation of §5 from every run state: the
// allowed transitions happen, the illegal ones fail with the spec's code
// and change nothing.
func TestStateMachine(t *testing.T) {
	type setup func(t *testing.T) (*Engine, string)
	slow := func(t *testing.T) *Engine { return newTestEngine(t, Options{TaskDelay: forever}) }
	fast := func(t *testing.T) *Engine { return newTestEngine(t, Options{TaskDelay: -1}) }
	states := map[string]setup{
		"created": func(t *testing.T) (*Engine, string) { e := slow(t); return e, mustCreate(t, e, "") },
		"running": func(t *testing.T) (*Engine, string) {
			e := slow(t)
			sid := mustCreate(t, e, "")
			mustStart(t, e, sid, TargetBuildPlan)
			return e, sid
		},
		"stopped": func(t *testing.T) (*Engine, string) {
			e := slow(t)
			sid := mustCreate(t, e, "")
			mustStart(t, e, sid, TargetBuildPlan)
			if _, err := e.Stop(context.Background(), "", StopRequest{SessionID: sid, Mode: "immediate"}); err != nil {
				t.Fatal(err)
			}
			return e, sid
		},
		"completed": func(t *testing.T) (*Engine, string) {
			e := fast(t)
			sid := mustCreate(t, e, "")
			mustStart(t, e, sid, TargetBuildPlan)
			waitState(t, e, sid, StateCompleted)
			return e, sid
		},
		"failed": func(t *testing.T) (*Engine, string) {
			e := fast(t)
			sid := mustCreate(t, e, "")
			mustStart(t, e, sid, TargetBuildPlan)
			waitState(t, e, sid, StateCompleted)
			if _, err := e.Write(context.Background(), "", WriteRequest{ArtifactURI: artifactURI(sid, "plan.json"), Content: "broken"}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Resume(context.Background(), "", ResumeRequest{SessionID: sid, Target: TargetValidatePlan}); err != nil {
				t.Fatal(err)
			}
			waitState(t, e, sid, StateFailed)
			return e, sid
		},
	}
	ops := map[string]func(e *Engine, sid string) error{
		"start": func(e *Engine, sid string) error {
			_, err := e.Start(context.Background(), "", StartRequest{SessionID: sid, Target: TargetBuildPlan})
			return err
		},
		"resume": func(e *Engine, sid string) error {
			_, err := e.Resume(context.Background(), "", ResumeRequest{SessionID: sid})
			return err
		},
		"stop": func(e *Engine, sid string) error {
			_, err := e.Stop(context.Background(), "", StopRequest{SessionID: sid, Mode: "immediate"})
			return err
		},
		"write": func(e *Engine, sid string) error {
			_, err := e.Write(context.Background(), "", WriteRequest{ArtifactURI: artifactURI(sid, "notes.md"), Content: "note"})
			return err
		},
	}
	for _, tc := range []struct {
		state, op string
		want      Code
	}{
		{"created", "start", ""},
		{"created", "resume", CodeRunNotFound},
		{"created", "stop", CodeRunNotActive},
		{"created", "write", ""},
		{"running", "start", CodeRunAlreadyActive},
		{"running", "resume", CodeRunAlreadyActive},
		{"running", "stop", ""},
		{"running", "write", CodeRunningReadonly},
		{"stopped", "start", CodeConflict},
		{"stopped", "resume", ""},
		{"stopped", "stop", CodeRunNotActive},
		{"stopped", "write", ""},
		{"completed", "start", CodeConflict},
		{"completed", "resume", ""},
		{"completed", "stop", CodeRunNotActive},
		{"completed", "write", ""},
		{"failed", "start", CodeConflict},
		{"failed", "resume", ""},
		{"failed", "stop", CodeRunNotActive},
		{"failed", "write", ""},
	} {
		t.Run(tc.state+"/"+tc.op, func(t *testing.T) {
			e, sid := states[tc.state](t)
			before := status(t, e, sid)
			err := ops[tc.op](e, sid)
			wantCode(t, err, tc.want)
			after := status(t, e, sid)
			switch {
			case tc.want != "":
				if after.RunID != before.RunID || after.State != before.State {
					t.Errorf("a refused %s moved the session from %s %s to %s %s", tc.op, before.RunID, before.State, after.RunID, after.State)
				}
			case tc.op == "start" || tc.op == "resume":
				if after.RunID == before.RunID {
					t.Errorf("%s did not create a run (still %q)", tc.op, after.RunID)
				}
			case tc.op == "stop":
				if after.State != StateStopped || after.StopReason != "user_request" {
					t.Errorf("after stop: %s (%s), want stopped (user_request)", after.State, after.StopReason)
				}
			}
		})
	}
}

func eventsOf(t *testing.T, e *Engine, sid string) []Event {
	t.Helper()
	r, err := e.Events(context.Background(), "", EventsRequest{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	return r.Events
}

func countEvents(evs []Event, typ, runID string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && ev.Data["run_id"] == runID {
			n++
		}
	}
	return n
}

// TestStopModes checks that a graceful stop lets the current task finish
// and an immediate one abandons it, and that neither leaves half a file.
func TestStopModes(t *testing.T) {
	t.Run("Immediate", func(t *testing.T) {
		e := newTestEngine(t, Options{TaskDelay: forever})
		sid := mustCreate(t, e, "")
		mustStart(t, e, sid, TargetBuildPlan)
		waitFor(t, "the first task", func() bool { return status(t, e, sid).Progress.CurrentTask != nil })
		st := status(t, e, sid)
		if st.State != StateRunning || st.Progress.CurrentTask == nil || st.Progress.CurrentTask.Name != "SetupPrompt" || st.Phase != PhaseInitializing {
			t.Fatalf("status while the first task runs = %+v", st)
		}
		if st.Progress.Overall < 0 || st.Progress.Overall >= 1 {
			t.Errorf("overall %v while the first task runs", st.Progress.Overall)
		}
		r, err := e.Stop(context.Background(), "", StopRequest{SessionID: sid, RunID: "run_0001", Mode: "immediate"})
		if err != nil || r.State != StateStopped {
			t.Fatalf("stop = %+v, %v", r, err)
		}
		evs := eventsOf(t, e, sid)
		if s, c := countEvents(evs, "task_started", "run_0001"), countEvents(evs, "task_completed", "run_0001"); s != 1 || c != 0 {
			t.Errorf("immediate stop: %d started, %d completed; want the one task abandoned", s, c)
		}
		if _, err := os.Stat(filepath.Join(e.root.Name(), sid, "out", "prompt.md")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the abandoned task's output exists: %v", err)
		}
	})
	t.Run("Graceful", func(t *testing.T) {
		e := newTestEngine(t, Options{TaskDelay: 30 * time.Millisecond})
		sid := mustCreate(t, e, "")
		mustStart(t, e, sid, TargetBuildPlan)
		waitFor(t, "a task running", func() bool { return status(t, e, sid).Progress.CurrentTask != nil })
		r, err := e.Stop(context.Background(), "", StopRequest{SessionID: sid})
		if err != nil || r.State != StateStopped {
			t.Fatalf("stop = %+v, %v", r, err)
		}
		evs := eventsOf(t, e, sid)
		s, c := countEvents(evs, "task_started", "run_0001"), countEvents(evs, "task_completed", "run_0001")
		if s == 0 || s != c {
			t.Errorf("graceful stop: %d started, %d completed; want every started task finished", s, c)
		}
	})
}

// TestSymlinksAreRefused plants symlinks in a session's output folder, as
// someone with filesystem access could, and checks that no API call
// follows them out of the session.
func TestSymlinksAreRefused(t *testing.T) {
	e := newTestEngine(t, Options{TaskDelay: -1})
	sid := mustCreate(t, e, "")
	out := filepath.Join(e.root.Name(), sid, "out")
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"evil.md":      secret,
		"session.md":   filepath.Join("..", sessionFileName),
		"escape.md":    filepath.Join("..", "..", "..", secret),
		"outside":      outside,
		"internal.md":  "run.log", // inside the root, but still a symlink
		"dangling.md":  filepath.Join(outside, "nope"),
		"selfloop.md":  "selfloop.md",
		"linkdir":      ".",
		"parentdir":    "..",
		"absparent.md": filepath.Dir(out),
	} {
		if err := os.Symlink(target, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, rel := range []string{"evil.md", "session.md", "escape.md", "outside/secret.txt", "internal.md", "dangling.md",
		"selfloop.md", "parentdir/session.json", "absparent.md"} {
		u := artifactURI(sid, rel)
		_, err := e.Read(ctx, "", ReadRequest{ArtifactURI: u})
		wantCode(t, err, CodeInvalidArtifactURI)
		_, err = e.Write(ctx, "", WriteRequest{ArtifactURI: u, Content: "pwned"})
		wantCode(t, err, CodeInvalidArtifactURI)
	}
	for _, rel := range []string{"outside/new.md", "linkdir/new.md", "linkdir/run.log"} {
		_, err := e.Write(ctx, "", WriteRequest{ArtifactURI: artifactURI(sid, rel), Content: "pwned"})
		wantCode(t, err, CodeInvalidArtifactURI)
		_, err = e.Read(ctx, "", ReadRequest{ArtifactURI: artifactURI(sid, rel)})
		wantCode(t, err, CodeInvalidArtifactURI)
	}
	if _, err := os.Stat(filepath.Join(out, "new.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write through an in-root folder symlink landed: %v", err)
	}
	for _, p := range []string{"outside", "parentdir", "linkdir", "linkdir/"} {
		_, err := e.List(ctx, "", ListRequest{SessionID: sid, Path: p})
		wantCode(t, err, CodeInvalidArtifactURI)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the file outside the session was changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was created outside the session: %v", err)
	}
	l, err := e.List(ctx, "", ListRequest{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range l.Entries {
		if en.Path != runLogPath {
			t.Errorf("listed %s; symlinks must never be listed", en.Path)
		}
	}
}

// TestConcurrentLockedWriters races writers holding the same sha256: the
// lock admits exactly one.
func TestConcurrentLockedWriters(t *testing.T) {
	e := newTestEngine(t, Options{TaskDelay: -1})
	sid := mustCreate(t, e, "")
	u := artifactURI(sid, "notes.md")
	first, err := e.Write(context.Background(), "", WriteRequest{ArtifactURI: u, Content: "v0"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	codes := make([]Code, n)
	for i := range n {
		wg.Go(func() {
			_, err := e.Write(context.Background(), "", WriteRequest{ArtifactURI: u, Content: "v1-" + string(rune('a'+i)),
				Lock: &Lock{ExpectedSHA256: first.SHA256}})
			if err != nil {
				codes[i] = ErrorCode(err)
			}
		})
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case "":
			won++
		case CodeConflict:
		default:
			t.Errorf("unexpected code %s", c)
		}
	}
	if won != 1 {
		t.Errorf("%d writers succeeded with the same expected_sha256, want 1", won)
	}
}

// TestRestart checks that sessions, runs and cursors survive the process:
// Close stops runs as server_shutdown, a crash leaves them "interrupted",
// and either resumes.
func TestRestart(t *testing.T) {
	root := t.TempDir()
	a, err := NewEngine(root, Options{TaskDelay: forever})
	if err != nil {
		t.Fatal(err)
	}
	sid := mustCreate(t, a, "")
	mustStart(t, a, sid, TargetBuildPlan)
	waitFor(t, "the first task", func() bool { return status(t, a, sid).Progress.CurrentTask != nil })
	before := eventsOf(t, a, sid)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = a.Status(context.Background(), "", StatusRequest{SessionID: sid})
	wantCode(t, err, CodeInternal)

	b := openTestEngine(t, root, Options{TaskDelay: -1})
	st := status(t, b, sid)
	if st.State != StateStopped || st.StopReason != "server_shutdown" || len(st.Warnings) == 0 {
		t.Fatalf("after a restart: %+v, want stopped by server_shutdown with a warning", st)
	}
	r, err := b.Events(context.Background(), "", EventsRequest{SessionID: sid, Since: before[len(before)-1].Cursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Events) == 0 || r.Events[0].Type != "run_stopped" || r.Events[0].Cursor != cursorOf(int64(len(before))+1) {
		t.Fatalf("events after the last cursor seen before the restart = %+v, want run_stopped at the next cursor", r.Events)
	}
	if _, err := b.Resume(context.Background(), "", ResumeRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	waitState(t, b, sid, StateCompleted)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash: session.json still says running.
	path := filepath.Join(root, sid, sessionFileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sf sessionFile
	if err := json.Unmarshal(raw, &sf); err != nil {
		t.Fatal(err)
	}
	sf.Runs[len(sf.Runs)-1].State = StateRunning
	raw, _ = json.Marshal(sf)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c := openTestEngine(t, root, Options{TaskDelay: -1})
	if st := status(t, c, sid); st.State != StateStopped || st.StopReason != "interrupted" {
		t.Errorf("after a crash: %s (%s), want stopped (interrupted)", st.State, st.StopReason)
	}
}

func TestPermission(t *testing.T) {
	ctx := context.Background()
	t.Run("OwnerScoped", func(t *testing.T) {
		e := newTestEngine(t, Options{TaskDelay: -1})
		sid := mustCreate(t, e, "alice")
		u := artifactURI(sid, "notes.md")
		for user, want := range map[string]Code{"alice": "", "": "", "bob": CodePermissionDenied} {
			_, err := e.Status(ctx, user, StatusRequest{SessionID: sid})
			wantCode(t, err, want)
			_, err = e.Write(ctx, user, WriteRequest{ArtifactURI: u, Content: "by " + user})
			wantCode(t, err, want)
			_, err = e.Read(ctx, user, ReadRequest{ArtifactURI: artifactURI(sid, runLogPath)})
			wantCode(t, err, want)
			_, err = e.List(ctx, user, ListRequest{SessionID: sid})
			wantCode(t, err, want)
			_, err = e.Events(ctx, user, EventsRequest{SessionID: sid})
			wantCode(t, err, want)
		}
		_, err := e.Start(ctx, "bob", StartRequest{SessionID: sid})
		wantCode(t, err, CodePermissionDenied)
		_, err = e.Create(ctx, "bob", CreateRequest{Idea: testIdea, Metadata: &Metadata{UserID: "alice"}})
		wantCode(t, err, CodePermissionDenied)
	})
	t.Run("RequireIdentity", func(t *testing.T) {
		e := newTestEngine(t, Options{TaskDelay: -1, RequireIdentity: true})
		_, err := e.Create(ctx, "", CreateRequest{Idea: testIdea})
		wantCode(t, err, CodePermissionDenied)
		sid := mustCreate(t, e, "alice")
		_, err = e.Status(ctx, "", StatusRequest{SessionID: sid})
		wantCode(t, err, CodePermissionDenied)
		_, err = e.Status(ctx, "alice", StatusRequest{SessionID: sid})
		wantCode(t, err, "")
	})
}

func TestRedactPrompts(t *testing.T) {
	for _, redact := range []bool{false, true} {
		e := newTestEngine(t, Options{TaskDelay: -1, RedactPrompts: redact})
		sid := mustCreate(t, e, "")
		mustStart(t, e, sid, TargetBuildPlan)
		waitState(t, e, sid, StateCompleted)
		raw, _ := json.Marshal(eventsOf(t, e, sid))
		if leaked := strings.Contains(string(raw), "sourdough"); leaked == redact {
			t.Errorf("redact %v: idea in the event stream = %v", redact, leaked)
		}
		r, err := e.Read(context.Background(), "", ReadRequest{ArtifactURI: artifactURI(sid, "prompt.md")})
		if err != nil || !strings.Contains(r.Content, "sourdough") {
			t.Errorf("redact %v: prompt.md = %q, %v; the artifact keeps the idea", redact, r.Content, err)
		}
	}
}

func TestMaxRuntime(t *testing.T) {
	e := newTestEngine(t, Options{TaskDelay: forever})
	c, err := e.Create(context.Background(), "", CreateRequest{Idea: testIdea, Config: &Config{MaxRuntimeSec: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, e, c.SessionID, TargetBuildPlan)
	st := waitState(t, e, c.SessionID, StateFailed)
	if st.Failure == nil || st.Failure.Message != errMaxRuntime.Error() {
		t.Errorf("failure = %+v, want %q", st.Failure, errMaxRuntime)
	}
	if _, err := e.Read(context.Background(), "", ReadRequest{ArtifactURI: artifactURI(c.SessionID, runErrorPath)}); err != nil {
		t.Errorf("run_error.json: %v", err)
	}
}

// TestCloseStopsEveryRun checks that Close ends every run goroutine and
// records the runs as stopped.
func TestCloseStopsEveryRun(t *testing.T) {
	base := runtime.NumGoroutine()
	root := t.TempDir()
	e, err := NewEngine(root, Options{TaskDelay: forever})
	if err != nil {
		t.Fatal(err)
	}
	var sids []string
	for range 3 {
		sid := mustCreate(t, e, "")
		mustStart(t, e, sid, TargetBuildPlanAndValidate)
		sids = append(sids, sid)
	}
	// A long-poll in flight must end too.
	polled := make(chan error, 1)
	go func() {
		_, err := e.Events(context.Background(), "", EventsRequest{SessionID: sids[0], Since: cursorOf(3), WaitMS: 30000})
		polled <- err
	}()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-polled:
	case <-time.After(10 * time.Second):
		t.Fatal("a long-poll outlived Close")
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
	again := openTestEngine(t, root, Options{TaskDelay: -1})
	for _, sid := range sids {
		if st := status(t, again, sid); st.State != StateStopped || st.StopReason != "server_shutdown" {
			t.Errorf("%s after Close: %s (%s), want stopped (server_shutdown)", sid, st.State, st.StopReason)
		}
	}
}

// ErrorCode returns the code of err if it is (or wraps) an [*Error], and
// [CodeInternal] otherwise.
func ErrorCode(err error) Code {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternal
}
