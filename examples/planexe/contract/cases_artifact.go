package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func (s *suite) testLocking(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan")
	u := uri(sid, "plan.md")
	r := s.read(t, u)
	if sha256Hex([]byte(r.Content)) != r.SHA256 {
		t.Fatalf("read sha256 %s is not the content's", r.SHA256)
	}
	_, cursor := s.events(t, sid, "")
	edited := r.Content + "\n## Extra section\n\n1. Do the extra thing.\n"
	w := s.write(t, u, edited, r.SHA256)
	if !w.Updated || w.SHA256 != sha256Hex([]byte(edited)) || !validTime(w.UpdatedAt) {
		t.Fatalf("locked write = %+v, want updated with the new content's sha256", w)
	}
	// A second writer still holding the old hash must not overwrite.
	d := s.refused(t, toolWrite, map[string]any{"artifact_uri": u, "content": "lost update",
		"lock": map[string]any{"expected_sha256": r.SHA256}}, codeConflict)
	if d["current_sha256"] != nil && d["current_sha256"] != w.SHA256 {
		t.Errorf("CONFLICT details.current_sha256 = %v, want %s", d["current_sha256"], w.SHA256)
	}
	if got := s.read(t, u); got.Content != edited || got.SHA256 != w.SHA256 {
		t.Errorf("after a conflicting write the artifact is %q, want the first edit", got.Content)
	}
	evs, _ := s.events(t, sid, cursor)
	i := slices.IndexFunc(evs, func(e event) bool {
		return e.Type == "artifact_updated" && e.Data["path"] == "plan.md" && e.Data["sha256"] == w.SHA256
	})
	if i < 0 {
		t.Errorf("no artifact_updated event for the write in %v", evs)
	}
	// Writing what is already there is not an update.
	if again := s.write(t, u, edited, w.SHA256); again.Updated || again.SHA256 != w.SHA256 {
		t.Errorf("rewriting the same content = %+v, want updated false", again)
	}
	// A lock on an artifact that does not exist cannot hold.
	s.refused(t, toolWrite, map[string]any{"artifact_uri": uri(sid, "notes/new.md"), "content": "x",
		"lock": map[string]any{"expected_sha256": r.SHA256}}, codeConflict)
	nw := s.write(t, uri(sid, "notes/new.md"), "hello\n", "")
	if e := s.list(t, sid, "notes")["notes/new.md"]; !nw.Updated || e.SHA256 != nw.SHA256 {
		t.Errorf("new artifact: write %+v, listed %+v", nw, e)
	}
	if e := s.list(t, sid, "")["notes"]; e.Type != "dir" {
		t.Errorf("notes listed as %+v, want a dir entry", e)
	}
}

func (s *suite) testRunningReadonly(t *testing.T) {
	s.whileRunning(t, idea, func(sid, runID string) bool {
		code, details, res := s.attempt(t, toolWrite, map[string]any{"artifact_uri": uri(sid, "notes.md"), "content": "edit"})
		switch {
		case code == codeRunningReadonly:
			if details["run_id"] != runID {
				t.Errorf("RUNNING_READONLY details.run_id = %v, want %s", details["run_id"], runID)
			}
		case !s.stillRunning(t, sid):
			return true
		default:
			t.Fatalf("write while %s runs: %s, want RUNNING_READONLY", runID, res.Structured)
		}
		// Reading stays allowed.
		s.read(t, uri(sid, "run.log"))
		if _, ok := s.list(t, sid, "")["notes.md"]; ok {
			t.Error("a refused write created the artifact")
		}
		return false
	})
}

func (s *suite) testEventCursors(t *testing.T) {
	sid := s.create(t, idea).SessionID
	s.start(t, sid, "build_plan")
	var polled []event
	cursor, prev := "", int64(0)
	deadline := time.Now().Add(waitTimeout)
	for !slices.ContainsFunc(polled, func(e event) bool { return e.Type == "run_completed" }) {
		var r eventsResp
		s.ok(t, toolEvents, map[string]any{"session_id": sid, "since": cursor}, &r, "cursor", "events")
		for _, e := range r.Events {
			n := cursorNumber(t, e.Cursor)
			if n <= prev {
				t.Fatalf("event cursor %s after cursor_%d", e.Cursor, prev)
			}
			prev = n
			if !validTime(e.TS) || e.Type == "" || e.Data == nil {
				t.Fatalf("malformed event %+v", e)
			}
		}
		switch {
		case len(r.Events) > 0 && r.Cursor != r.Events[len(r.Events)-1].Cursor:
			t.Fatalf("response cursor %s, want the last event's %s", r.Cursor, r.Events[len(r.Events)-1].Cursor)
		case len(r.Events) == 0 && cursor != "" && r.Cursor != cursor:
			t.Fatalf("empty poll moved the cursor from %s to %s", cursor, r.Cursor)
		}
		polled = append(polled, r.Events...)
		cursor = r.Cursor
		if time.Now().After(deadline) {
			t.Fatalf("no run_completed after %v", waitTimeout)
		}
		if len(r.Events) == 0 {
			time.Sleep(pollEvery)
		}
	}
	all, last := s.events(t, sid, "")
	if len(all) != len(polled) {
		t.Fatalf("polling saw %d events, one read from the start %d", len(polled), len(all))
	}
	for i := range all {
		if all[i].Cursor != polled[i].Cursor || all[i].Type != polled[i].Type {
			t.Fatalf("event %d: polled %s %s, replayed %s %s", i, polled[i].Cursor, polled[i].Type, all[i].Cursor, all[i].Type)
		}
	}
	if tail, _ := s.events(t, sid, all[len(all)/2].Cursor); len(tail) != len(all)-len(all)/2-1 || tail[0].Cursor != all[len(all)/2+1].Cursor {
		t.Errorf("replay from a middle cursor returned %d events, want %d", len(tail), len(all)-len(all)/2-1)
	}
	var idle eventsResp
	s.ok(t, toolEvents, map[string]any{"session_id": sid, "since": last, "wait_ms": 20}, &idle)
	if len(idle.Events) != 0 || idle.Cursor != last {
		t.Errorf("idle poll at %s = %+v, want no events and the same cursor", last, idle)
	}
	// A long-poll returns when an event arrives.
	got := make(chan Result, 1)
	go func() {
		// The waiting call must not use t (it may outlive a failure).
		ctx, cancel := contextWithTimeout()
		defer cancel()
		res, err := s.c.Call(ctx, toolEvents, map[string]any{"session_id": sid, "since": last, "wait_ms": 10000})
		if err != nil {
			res = Result{IsError: true, Structured: json.RawMessage(fmt.Sprintf("%q", err.Error()))}
		}
		got <- res
	}()
	s.resume(t, sid, nil)
	var woke eventsResp
	if res := <-got; res.IsError || json.Unmarshal(res.Structured, &woke) != nil || len(woke.Events) == 0 ||
		cursorNumber(t, woke.Events[0].Cursor) != cursorNumber(t, last)+1 {
		t.Errorf("long-poll returned %s, want the events after %s", res.Structured, last)
	}
	s.waitState(t, sid, "completed")
	s.refused(t, toolEvents, map[string]any{"session_id": sid, "since": "bogus"}, codeInvalidArgument)
	s.refused(t, toolEvents, map[string]any{"session_id": sid, "since": "cursor_999999999"}, codeInvalidArgument)
}

func (s *suite) testRangeReads(t *testing.T) {
	sid := s.runToCompletion(t, "Plan a café ☕ in Zürich for über-early risers who want sourdough croissants.", "build_plan")
	u := uri(sid, "plan.md")
	whole := s.read(t, u)
	var got []byte
	for start, n := 0, 0; ; start, n = start+7, n+1 {
		if n > len(whole.Content) {
			t.Fatal("range reads never reached eof")
		}
		var r readResp
		s.ok(t, toolRead, map[string]any{"artifact_uri": u, "range": map[string]any{"start": start, "length": 7}}, &r)
		if r.SHA256 != whole.SHA256 {
			t.Fatalf("range read sha256 %s, want the whole artifact's %s", r.SHA256, whole.SHA256)
		}
		got = append(got, decode(t, r)...)
		if r.EOF {
			break
		}
	}
	if string(got) != whole.Content {
		t.Fatalf("range reads reassemble %d bytes that differ from the %d-byte artifact", len(got), len(whole.Content))
	}
	var past readResp
	s.ok(t, toolRead, map[string]any{"artifact_uri": u, "range": map[string]any{"start": len(whole.Content) + 10, "length": 5}}, &past)
	if past.Content != "" || !past.EOF {
		t.Errorf("read past the end = %q (eof %v), want empty at eof", past.Content, past.EOF)
	}
	s.refused(t, toolRead, map[string]any{"artifact_uri": u, "range": map[string]any{"start": -1, "length": 5}}, codeInvalidArgument)
	// A range that splits a character still returns the exact bytes.
	prompt := s.read(t, uri(sid, "prompt.md")).Content
	i := strings.Index(prompt, "☕")
	var mid readResp
	s.ok(t, toolRead, map[string]any{"artifact_uri": uri(sid, "prompt.md"), "range": map[string]any{"start": i + 1, "length": 2}}, &mid)
	if b := decode(t, mid); !bytes.Equal(b, []byte(prompt)[i+1:i+3]) {
		t.Errorf("mid-character range = %x, want %x", b, []byte(prompt)[i+1:i+3])
	}
}

func decode(t *testing.T, r readResp) []byte {
	t.Helper()
	if r.ContentEncoding != "base64" {
		return []byte(r.Content)
	}
	b, err := base64.StdEncoding.DecodeString(r.Content)
	if err != nil {
		t.Fatalf("content_encoding base64: %v", err)
	}
	return b
}

func (s *suite) testPathTraversal(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan")
	other := s.create(t, idea).SessionID
	s.write(t, uri(sid, "notes/a.md"), "a\n", "")
	base := "planexe://sessions/" + sid
	for _, u := range []string{
		base + "/out/../session.json",
		base + "/out/../../../../etc/passwd",
		base + "/out/notes/../../session.json",
		base + "/out/%2e%2e/session.json",
		base + "/out/%2E%2E%2Fsession.json",
		base + "/out/..%2fsession.json",
		base + "/out/plan.md%00.txt",
		base + "/out//etc/passwd",
		base + "/out/./plan.md",
		base + "/out/notes\\..\\..\\session.json",
		base + "/out/C:/Windows/win.ini",
		base + "/out/plan.md?x=1",
		base + "/out/plan.md#frag",
		base + "/out/.hidden",
		base + "/out/",
		base + "/out/notes",
		base + "/out/no_such_file.md",
		base + "/session.json",
		base + "/../" + other + "/out/plan.md",
		"planexe://sessions/../out/plan.md",
		"planexe://sessions/%2e%2e/out/plan.md",
		"PLANEXE://sessions/" + sid + "/out/plan.md",
		"file:///etc/passwd",
		"/etc/passwd",
		"../plan.md",
		"plan.md",
		"",
	} {
		s.refused(t, toolRead, map[string]any{"artifact_uri": u}, codeInvalidArtifactURI)
		if !strings.HasSuffix(u, "no_such_file.md") {
			s.refused(t, toolWrite, map[string]any{"artifact_uri": u, "content": "pwned"}, codeInvalidArtifactURI)
		}
	}
	for _, p := range []string{"..", "../", "/", "/etc", "notes/../..", "%2e%2e", ".", "./notes", "notes\\..", "plan.md", "no_such_dir"} {
		s.refused(t, toolList, map[string]any{"session_id": sid, "path": p}, codeInvalidArtifactURI)
	}
	// Another session's artifacts are not this session's inputs.
	s.refused(t, toolResume, map[string]any{"session_id": sid, "invalidate": map[string]any{"artifacts": []any{uri(other, "run.log")}}}, codeInvalidArtifactURI)
	for p := range s.list(t, sid, "") {
		if !slices.Contains(append(outputsOf(taskNames()), "run.log", "luigi_state.json", "notes"), p) {
			t.Errorf("unexpected artifact %s after refused writes", p)
		}
	}
}

func (s *suite) testServerManaged(t *testing.T) {
	sid := s.runToCompletion(t, idea, "build_plan")
	entries := s.list(t, sid, "")
	for p, kind := range map[string]string{"run.log": "log", "luigi_state.json": "state"} {
		if entries[p].Kind != kind {
			t.Errorf("%s: kind %q, want %q", p, entries[p].Kind, kind)
		}
		r := s.read(t, uri(sid, p))
		s.refused(t, toolWrite, map[string]any{"artifact_uri": uri(sid, p), "content": "{}",
			"lock": map[string]any{"expected_sha256": r.SHA256}}, codePermissionDenied)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(s.read(t, uri(sid, "luigi_state.json")).Content), &state); err != nil {
		t.Errorf("luigi_state.json is not JSON: %v", err)
	}
}

func (s *suite) testSeeds(t *testing.T) {
	sid := s.create(t, idea).SessionID
	custom := "# Prompt\n\nBuild a seabird museum with seabird tours and seabird nesting walks on a windy island.\n"
	w := s.write(t, uri(sid, "prompt.md"), custom, "")
	var run runResp
	s.ok(t, toolStart, map[string]any{"session_id": sid, "target": "build_plan",
		"inputs": map[string]any{"seed_artifacts": []any{uri(sid, "prompt.md")}}}, &run)
	s.waitState(t, sid, "completed")
	evs, _ := s.events(t, sid, "")
	got := started(evs, run.RunID)
	if want := []string{"ExtractAssumptions", "DraftOutline", "WriteDetailedPlan", "StructurePlan", "ExportPlan"}; !sameSet(got, want) {
		t.Errorf("run with a seeded prompt.md ran %v, want %v", got, want)
	}
	if r := s.read(t, uri(sid, "prompt.md")); r.SHA256 != w.SHA256 {
		t.Error("the seed artifact was regenerated")
	}
	if !strings.Contains(s.read(t, uri(sid, "assumptions.md")).Content, "seabird") {
		t.Error("assumptions.md was not derived from the seeded prompt")
	}
	fresh := s.create(t, idea).SessionID
	s.refused(t, toolStart, map[string]any{"session_id": fresh, "target": "build_plan",
		"inputs": map[string]any{"seed_artifacts": []any{uri(fresh, "missing.md")}}}, codeInvalidArtifactURI)
	s.refused(t, toolStart, map[string]any{"session_id": fresh, "target": "build_plan",
		"inputs": map[string]any{"seed_artifacts": []any{uri(sid, "prompt.md")}}}, codeInvalidArtifactURI)
}
