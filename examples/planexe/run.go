package planexe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// activeRun is the live part of a running run. Its fields are guarded by
// the session's mu, except plan, forced, pinned, cancel and done, which are
// set before the run's goroutine starts and never change.
type activeRun struct {
	rec    *runRecord
	plan   []*task
	forced map[string]bool // tasks to recompute whatever their inputs say
	pinned map[string]bool // tasks whose output is a seed artifact: never recomputed
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once rec holds the final state

	stopMode     string // "" until a stop is requested
	current      *task
	currentStart time.Time
}

// taskError is a task that could not produce its output: the run fails, and
// resuming after the cause is fixed continues from that task.
type taskError struct {
	task string
	err  error
}

func (te *taskError) Error() string { return fmt.Sprintf("task %s: %v", te.task, te.err) }
func (te *taskError) Unwrap() error { return te.err }

func (e *Engine) checkTarget(target string) error {
	if _, ok := e.pipe.targets[target]; !ok {
		return newError(CodeInvalidTarget, map[string]any{"target": clip(target), "targets": Targets()},
			"unknown target %q", clip(target))
	}
	return nil
}

// Start starts the first run of a session (§6.2, §5.3 created → running).
func (e *Engine) Start(_ context.Context, user string, req StartRequest) (RunResponse, error) {
	target := req.Target
	if target == "" {
		target = defaultTarget
	}
	if err := e.checkTarget(target); err != nil {
		return RunResponse{}, err
	}
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return RunResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		return RunResponse{}, runAlreadyActive(s.active.rec.ID)
	}
	if last := s.lastRun(); last != nil {
		// §5.3: completed → running is invalid, and stopped → running goes
		// through resume. A second start is a conflict with the state.
		return RunResponse{}, newError(CodeConflict, map[string]any{"run_id": last.ID, "state": last.State},
			"session %s already has %s (%s); use planexe.session.resume", s.id, last.ID, last.State)
	}
	pinned := make(map[string]bool)
	var seeds []string
	if req.Inputs != nil {
		for _, uri := range req.Inputs.SeedArtifacts {
			rel, err := s.ownPath(uri)
			if err != nil {
				return RunResponse{}, err
			}
			if _, err := statRegular(s.out, uri, rel); err != nil {
				return RunResponse{}, err
			}
			if t, ok := e.pipe.byOutput[rel]; ok {
				pinned[t.Name] = true
			}
			seeds = append(seeds, rel)
		}
	}
	return e.beginRun(s, target, nil, pinned, map[string]any{"seed_artifacts": seeds})
}

func runAlreadyActive(runID string) error {
	return newError(CodeRunAlreadyActive, map[string]any{"run_id": runID}, "a run is currently active for this session")
}

// ownPath resolves an artifact URI that must belong to session s.
func (s *session) ownPath(uri string) (string, error) {
	sid, rel, err := parseArtifactURI(uri)
	if err != nil {
		return "", err
	}
	if sid != s.id {
		return "", newError(CodeInvalidArtifactURI, map[string]any{"artifact_uri": clip(uri), "reason": "another session"},
			"%s does not belong to session %s", clip(uri), s.id)
	}
	return rel, nil
}

// Resume starts a new run that reuses every up-to-date output (§6.5).
func (e *Engine) Resume(_ context.Context, user string, req ResumeRequest) (RunResponse, error) {
	if req.ResumePolicy != "" && req.ResumePolicy != defaultResumePolicy {
		return RunResponse{}, newError(CodeInvalidArgument, map[string]any{"resume_policy": clip(req.ResumePolicy), "policies": []string{defaultResumePolicy}},
			"unknown resume_policy %q", clip(req.ResumePolicy))
	}
	if req.Target != "" {
		if err := e.checkTarget(req.Target); err != nil {
			return RunResponse{}, err
		}
	}
	var staleTasks []string
	if req.Invalidate != nil {
		for _, name := range req.Invalidate.Tasks {
			if _, ok := e.pipe.byName[name]; !ok {
				return RunResponse{}, newError(CodeInvalidTarget, map[string]any{"task": clip(name)}, "unknown task %q", clip(name))
			}
		}
		staleTasks = req.Invalidate.Tasks
	}
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return RunResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A malformed request is refused as such before the state is judged.
	var stalePaths []string
	if req.Invalidate != nil {
		for _, uri := range req.Invalidate.Artifacts {
			rel, err := s.ownPath(uri)
			if err != nil {
				return RunResponse{}, err
			}
			if _, err := statRegular(s.out, uri, rel); err != nil {
				return RunResponse{}, err
			}
			stalePaths = append(stalePaths, rel)
		}
	}
	if s.active != nil {
		return RunResponse{}, runAlreadyActive(s.active.rec.ID)
	}
	last := s.lastRun()
	if last == nil {
		return RunResponse{}, newError(CodeRunNotFound, map[string]any{"session_id": s.id},
			"session %s has no run to resume; start it first", s.id)
	}
	forced := e.pipe.downstream(staleTasks)
	maps.Copy(forced, e.pipe.dependents(stalePaths))
	target := req.Target
	if target == "" {
		target = last.Target
	}
	return e.beginRun(s, target, forced, nil, map[string]any{"resumed_from": last.ID, "invalidated_tasks": sortedKeys(forced)})
}

func sortedKeys(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}

// beginRun records a new run and starts its goroutine; s.mu must be held.
func (e *Engine) beginRun(s *session, target string, forced, pinned map[string]bool, extra map[string]any) (RunResponse, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return RunResponse{}, newError(CodeInternal, nil, "the server is shutting down")
	}
	e.runs.Add(1) // under e.mu, so Close cannot be waiting yet
	e.mu.Unlock()

	now := e.now()
	plan := e.pipe.plan(target)
	rec := &runRecord{ID: fmt.Sprintf("run_%04d", len(s.runs)+1), Target: target, State: StateRunning,
		Phase: PhaseInitializing, StartedAt: now, Total: len(plan)}
	// An invalidation outlives this run: if it is stopped before the task
	// runs, the next resume must still recompute it.
	for name := range forced {
		if tr := s.tasks[name]; tr != nil {
			tr.Stale = true
		} else {
			s.tasks[name] = &taskRecord{Stale: true}
		}
	}
	maxRuntime := s.config.MaxRuntimeSec
	if maxRuntime == 0 {
		maxRuntime = defaultMaxRuntimeSec
	}
	runCtx, cancel := context.WithCancelCause(e.ctx)
	runCtx, cancelDeadline := context.WithTimeoutCause(runCtx, time.Duration(maxRuntime*float64(time.Second)), errMaxRuntime)
	ar := &activeRun{rec: rec, plan: plan, forced: forced, pinned: pinned, done: make(chan struct{}),
		cancel: func(cause error) { cancel(cause); cancelDeadline() }}
	s.runs = append(s.runs, rec)
	s.active = ar
	data := map[string]any{"run_id": rec.ID, "target": target}
	maps.Copy(data, extra)
	e.emit(s, "run_started", data)
	e.emit(s, "phase_changed", map[string]any{"run_id": rec.ID, "phase": rec.Phase})
	if err := s.save(); err != nil {
		e.opts.Logger.Error("planexe: record a run start", "session_id", s.id, "err", err)
	}
	e.writeLuigiState(s)
	go e.execute(runCtx, s, ar)
	return RunResponse{RunID: rec.ID, State: StateRunning}, nil
}

const (
	defaultMaxRuntimeSec = 7200
	maxRuntimeLimit      = 7 * 24 * 3600 // keeps the timeout far from Duration overflow
)

// execute is the goroutine of one run. It owns nothing but ar's progress
// fields, which it changes under s.mu.
func (e *Engine) execute(ctx context.Context, s *session, ar *activeRun) {
	defer e.runs.Done()
	err := e.runTasks(ctx, s, ar)
	s.mu.Lock()
	e.finishRun(s, ar, err)
	s.mu.Unlock()
	ar.cancel(nil) // release the contexts' timers
	close(ar.done)
}

func (e *Engine) runTasks(ctx context.Context, s *session, ar *activeRun) error {
	for _, t := range ar.plan {
		in, run, err := e.beginTask(ctx, s, ar, t)
		if err != nil || !run {
			if err != nil {
				return err
			}
			continue
		}
		if err := sleep(ctx, e.opts.TaskDelay); err != nil {
			return context.Cause(ctx)
		}
		out, err := t.produce(s.idea, in.data)
		if err != nil {
			return &taskError{task: t.Name, err: err}
		}
		if err := e.completeTask(ctx, s, ar, t, in.hashes, out); err != nil {
			return err
		}
	}
	return nil
}

type taskInputs struct {
	data   inputs
	hashes map[string]string
}

// beginTask decides whether t must run, and if so announces it. It returns
// run == false for an up-to-date task.
func (e *Engine) beginTask(ctx context.Context, s *session, ar *activeRun, t *task) (taskInputs, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar.stopMode != "" {
		return taskInputs{}, false, errStopRequested
	}
	if ctx.Err() != nil {
		return taskInputs{}, false, context.Cause(ctx)
	}
	// Reading under the lock is cheap (small files) and makes what we hash
	// exactly what we produce from: artifact.write is refused while running.
	in := taskInputs{data: make(inputs), hashes: make(map[string]string)}
	for _, p := range t.Inputs {
		b, err := s.out.ReadFile(p)
		if err != nil {
			return taskInputs{}, false, &taskError{task: t.Name, err: fmt.Errorf("read input: %w", err)}
		}
		in.data[p] = b
		in.hashes[p] = sha256Hex(b)
	}
	reason, err := s.staleReason(t, ar, in.hashes)
	if err != nil {
		return taskInputs{}, false, &taskError{task: t.Name, err: err}
	}
	if reason == "" {
		ar.rec.Done++
		e.emit(s, "log", map[string]any{"level": "info", "run_id": ar.rec.ID, "task": t.Name,
			"msg": fmt.Sprintf("%s is up to date", t.Name)})
		return taskInputs{}, false, nil
	}
	if t.Phase != ar.rec.Phase {
		ar.rec.Phase = t.Phase
		e.emit(s, "phase_changed", map[string]any{"run_id": ar.rec.ID, "phase": t.Phase})
	}
	ar.current, ar.currentStart = t, e.now()
	e.emit(s, "task_started", map[string]any{"run_id": ar.rec.ID, "task": t.Name, "phase": t.Phase, "reason": reason})
	if t.Name == "SetupPrompt" {
		msg := "Expanding the idea: " + clip(s.idea)
		if e.opts.RedactPrompts {
			msg = fmt.Sprintf("Expanding the idea: [redacted, %d bytes]", len(s.idea))
		}
		e.emit(s, "log", map[string]any{"level": "info", "run_id": ar.rec.ID, "task": t.Name, "msg": msg})
	}
	return in, true, nil
}

// staleReason says why t must run, or "" if its output is up to date. This
// is Luigi's rule (an output that exists is complete) refined by the hashes
// of §9: a task whose inputs changed since it last ran is stale, so an edit
// recomputes exactly what depends on it.
func (s *session) staleReason(t *task, ar *activeRun, hashes map[string]string) (string, error) {
	if ar.pinned[t.Name] {
		return "", nil
	}
	rec := s.tasks[t.Name]
	if ar.forced[t.Name] || rec != nil && rec.Stale {
		return "invalidated", nil
	}
	fi, err := s.out.Lstat(t.Output)
	if errors.Is(err, fs.ErrNotExist) {
		return "output missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", t.Output, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", t.Output)
	}
	if rec == nil {
		return "", nil // produced outside the pipeline, e.g. a seed written before start
	}
	for _, p := range t.Inputs {
		if rec.Inputs[p] != hashes[p] {
			return "input changed: " + p, nil
		}
	}
	return "", nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// completeTask commits t's output, unless the run was stopped immediately
// meanwhile: an immediate stop abandons the task in flight.
func (e *Engine) completeTask(ctx context.Context, s *session, ar *activeRun, t *task, hashes map[string]string, out []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	prev, existed, err := fileSHA256(s.out, t.Output)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.Name, err)
	}
	now := e.now()
	if err := writeAtomic(s.out, t.Output, out, now, false); err != nil {
		return fmt.Errorf("task %s: %w", t.Name, err)
	}
	sum := sha256Hex(out)
	s.tasks[t.Name] = &taskRecord{RunID: ar.rec.ID, Inputs: hashes, Output: sum, CompletedAt: now}
	s.provenance[t.Output] = &provenance{Task: t.Name, RunID: ar.rec.ID, SHA256: sum, UpdatedAt: now}
	ar.current = nil
	ar.rec.Done++
	typ := "artifact_created"
	if existed {
		typ = "artifact_updated"
	}
	e.emit(s, typ, map[string]any{"path": t.Output, "artifact_uri": artifactURI(s.id, t.Output), "kind": t.Kind,
		"sha256": sum, "run_id": ar.rec.ID, "task": t.Name, "changed": !existed || prev != sum})
	e.emit(s, "task_completed", map[string]any{"run_id": ar.rec.ID, "task": t.Name, "path": t.Output, "sha256": sum})
	overall, _ := e.progress(ar, now)
	e.emit(s, "progress_updated", map[string]any{"run_id": ar.rec.ID, "overall": overall})
	if err := s.save(); err != nil {
		e.opts.Logger.Error("planexe: record a task", "session_id", s.id, "err", err)
	}
	e.writeLuigiState(s)
	return nil
}

// progress is the run's progress: overall in [0,1] counts finished tasks
// (run or found up to date) plus the elapsed share of the current one, pct.
// s.mu must be held.
func (e *Engine) progress(ar *activeRun, now time.Time) (overall, pct float64) {
	if ar.current != nil && e.opts.TaskDelay > 0 {
		// Kept below 1 until the task's output is committed.
		pct = round3(math.Min(0.99, float64(now.Sub(ar.currentStart))/float64(e.opts.TaskDelay)))
	}
	return round3(math.Min(1, (float64(ar.rec.Done)+pct)/float64(max(ar.rec.Total, 1)))), pct
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// finishRun records how the run ended; s.mu must be held. A task failure
// wins over a pending stop (it is what happened); a requested stop wins
// over completion, so that a stop that was accepted always ends "stopped".
func (e *Engine) finishRun(s *session, ar *activeRun, err error) {
	rec := ar.rec
	rec.EndedAt = e.now()
	ar.current = nil
	var te *taskError
	switch {
	case errors.As(err, &te):
		rec.State, rec.Failure = StateFailed, &Failure{Task: te.task, Message: te.err.Error()}
	case ar.stopMode != "":
		rec.State, rec.StopReason = StateStopped, "user_request"
	case err == nil:
		rec.State = StateCompleted
		rec.Phase = PhaseFinalizing
		e.emit(s, "phase_changed", map[string]any{"run_id": rec.ID, "phase": PhaseFinalizing})
	case errors.Is(err, errShutdown):
		rec.State, rec.StopReason = StateStopped, "server_shutdown"
	case errors.Is(err, errMaxRuntime):
		rec.State, rec.Failure = StateFailed, &Failure{Message: errMaxRuntime.Error()}
	default:
		e.opts.Logger.Error("planexe: run failed", "session_id", s.id, "run_id", rec.ID, "err", err)
		rec.State, rec.Failure = StateFailed, &Failure{Message: "internal error: " + err.Error()}
	}
	s.active = nil
	switch rec.State {
	case StateCompleted:
		e.emit(s, "run_completed", map[string]any{"run_id": rec.ID, "target": rec.Target})
	case StateStopped:
		e.emit(s, "run_stopped", map[string]any{"run_id": rec.ID, "reason": rec.StopReason, "mode": ar.stopMode})
	case StateFailed:
		e.writeRunError(s, rec)
		e.emit(s, "log", map[string]any{"level": "error", "run_id": rec.ID, "task": rec.Failure.Task, "msg": rec.Failure.Message})
		e.emit(s, "run_failed", map[string]any{"run_id": rec.ID, "task": rec.Failure.Task, "error": rec.Failure.Message})
	}
	if err := s.save(); err != nil {
		e.opts.Logger.Error("planexe: record a run end", "session_id", s.id, "err", err)
	}
	e.writeLuigiState(s)
}

// writeRunError persists the failure as run_error.json (§14).
func (e *Engine) writeRunError(s *session, rec *runRecord) {
	trace := []string{fmt.Sprintf("run %s (target %s) failed in phase %s", rec.ID, rec.Target, rec.Phase)}
	if t, ok := e.pipe.byName[rec.Failure.Task]; ok {
		trace = append(trace, fmt.Sprintf("task %s, output %s, inputs %s", t.Name, t.Output, strings.Join(t.Inputs, ", ")))
	}
	trace = append(trace, rec.Failure.Message)
	doc := map[string]any{"run_id": rec.ID, "task": rec.Failure.Task, "error": rec.Failure.Message,
		"failed_at": formatTime(rec.EndedAt), "traceback": trace}
	data, err := marshalDoc(doc)
	if err == nil {
		err = writeAtomic(s.out, runErrorPath, data, rec.EndedAt, false)
	}
	if err != nil {
		e.opts.Logger.Error("planexe: write run_error.json", "session_id", s.id, "err", err)
	}
}

// writeLuigiState mirrors the task records into the luigi_state.json
// artifact (§6.4: persist enough Luigi state to resume; Appendix B kind
// "state"), so that a client can see why resume will or will not recompute a
// task. s.mu must be held.
func (e *Engine) writeLuigiState(s *session) {
	type taskState struct {
		State       string            `json:"state"`
		Phase       string            `json:"phase"`
		Output      string            `json:"output"`
		Inputs      []string          `json:"inputs"`
		RunID       string            `json:"run_id,omitempty"`
		OutputSHA   string            `json:"output_sha256,omitempty"`
		InputSHA    map[string]string `json:"input_sha256,omitempty"`
		CompletedAt string            `json:"completed_at,omitempty"`
	}
	tasks := make(map[string]taskState)
	for _, t := range e.pipe.tasks {
		ts := taskState{State: "pending", Phase: t.Phase, Output: t.Output, Inputs: t.Inputs}
		if ts.Inputs == nil {
			ts.Inputs = []string{}
		}
		if rec := s.tasks[t.Name]; rec != nil {
			ts.RunID, ts.OutputSHA, ts.InputSHA, ts.CompletedAt = rec.RunID, rec.Output, rec.Inputs, formatTime(rec.CompletedAt)
			switch {
			case rec.Stale:
				ts.State = "stale"
			case rec.RunID != "":
				ts.State = "complete"
			}
		}
		tasks[t.Name] = ts
	}
	doc := map[string]any{"session_id": s.id, "config": s.config, "tasks": tasks, "targets": e.pipe.targets}
	if last := s.lastRun(); last != nil {
		doc["run_id"], doc["run_state"] = last.ID, last.State
	}
	data, err := marshalDoc(doc)
	if err == nil {
		err = writeAtomic(s.out, luigiStatePath, data, e.now(), false)
	}
	if err != nil {
		e.opts.Logger.Error("planexe: write luigi_state.json", "session_id", s.id, "err", err)
	}
}

// Stop stops the running run (§6.4) and returns once it has stopped: a
// graceful stop lets the current task finish, an immediate one abandons it.
// Either way every completed task's output is kept for resume.
func (e *Engine) Stop(ctx context.Context, user string, req StopRequest) (StopResponse, error) {
	mode := req.Mode
	if mode == "" {
		mode = "graceful"
	}
	if mode != "graceful" && mode != "immediate" {
		return StopResponse{}, newError(CodeInvalidArgument, map[string]any{"mode": clip(mode), "modes": []string{"graceful", "immediate"}},
			"unknown stop mode %q", clip(mode))
	}
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return StopResponse{}, err
	}
	s.mu.Lock()
	ar := s.active
	if req.RunID != "" {
		i := slices.IndexFunc(s.runs, func(r *runRecord) bool { return r.ID == req.RunID })
		if i < 0 {
			s.mu.Unlock()
			return StopResponse{}, newError(CodeRunNotFound, map[string]any{"run_id": clip(req.RunID)}, "session %s has no run %q", s.id, clip(req.RunID))
		}
		if ar == nil || ar.rec.ID != req.RunID {
			state := s.runs[i].State
			s.mu.Unlock()
			return StopResponse{}, newError(CodeRunNotActive, map[string]any{"run_id": req.RunID, "state": state}, "run %s is %s, not running", req.RunID, state)
		}
	}
	if ar == nil {
		details := map[string]any{}
		if last := s.lastRun(); last != nil {
			details["run_id"], details["state"] = last.ID, last.State
		}
		s.mu.Unlock()
		return StopResponse{}, newError(CodeRunNotActive, details, "no run is running in session %s", s.id)
	}
	if ar.stopMode != "immediate" {
		ar.stopMode = mode
		e.emit(s, "log", map[string]any{"level": "info", "run_id": ar.rec.ID, "msg": "stop requested (" + mode + ")"})
	}
	if mode == "immediate" {
		ar.cancel(errStopRequested)
	}
	s.mu.Unlock()

	select {
	case <-ar.done:
	case <-ctx.Done():
		return StopResponse{}, internalError("wait for the run to stop", ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return StopResponse{State: ar.rec.State, RunID: ar.rec.ID}, nil
}

// Status reports the latest run of a session (§6.3).
func (e *Engine) Status(_ context.Context, user string, req StatusRequest) (StatusResponse, error) {
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return StatusResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := e.now()
	resp := StatusResponse{SessionID: s.id, State: SessionCreated, SessionState: SessionCreated,
		LatestArtifacts: s.latestArtifacts(e.pipe, 5), Warnings: []string{}}
	rec := s.lastRun()
	if rec == nil {
		return resp, nil
	}
	resp.SessionState = SessionActive
	resp.RunID, resp.State, resp.Phase, resp.Target = rec.ID, rec.State, rec.Phase, rec.Target
	resp.StopReason, resp.Failure = rec.StopReason, rec.Failure
	end := rec.EndedAt
	if end.IsZero() {
		end = now
	}
	resp.Timing = &Timing{StartedAt: formatTime(rec.StartedAt), ElapsedSec: round3(end.Sub(rec.StartedAt).Seconds()),
		EndedAt: formatTime(rec.EndedAt)}
	switch {
	case s.active != nil && s.active.rec == rec:
		overall, pct := e.progress(s.active, now)
		resp.Progress.Overall = overall
		if cur := s.active.current; cur != nil {
			resp.Progress.CurrentTask = &CurrentTask{Name: cur.Name, Pct: pct}
		}
	case rec.State == StateCompleted:
		resp.Progress.Overall = 1
	default:
		resp.Progress.Overall = round3(float64(rec.Done) / float64(max(rec.Total, 1)))
	}
	if s.active == nil {
		for _, p := range sortedProvenance(s.provenance) {
			if pv := s.provenance[p]; pv.EditReason != "" && pv.UpdatedAt.After(rec.StartedAt) && len(e.pipe.dependents([]string{p})) > 0 {
				resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s was edited after %s started; resume to recompute what depends on it", p, rec.ID))
			}
		}
	}
	if rec.StopReason == "server_shutdown" || rec.StopReason == "interrupted" {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s was stopped by the server (%s); resume to continue", rec.ID, rec.StopReason))
	}
	return resp, nil
}

func sortedProvenance(m map[string]*provenance) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}

// latestArtifacts returns the n artifacts this server wrote last.
func (s *session) latestArtifacts(p *pipeline, n int) []ArtifactRef {
	paths := sortedProvenance(s.provenance)
	sort.SliceStable(paths, func(i, j int) bool {
		return s.provenance[paths[i]].UpdatedAt.After(s.provenance[paths[j]].UpdatedAt)
	})
	out := []ArtifactRef{}
	for _, path := range paths[:min(n, len(paths))] {
		out = append(out, ArtifactRef{Path: path, ArtifactURI: artifactURI(s.id, path), Kind: p.kindOf(path),
			UpdatedAt: formatTime(s.provenance[path].UpdatedAt)})
	}
	return out
}
