package planexe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The run states of §5.2 ("stopping" is not used: a stop returns once the
// run has stopped) and the session states of §5.1 ("archived" is the v1.1
// extension and not implemented).
const (
	StateRunning   = "running"
	StateStopped   = "stopped"
	StateCompleted = "completed"
	StateFailed    = "failed"

	SessionCreated = "created"
	SessionActive  = "active"
)

const (
	sessionFileName = "session.json"
	eventsFileName  = "events.jsonl"
)

// session is one PlanExe session. Its folder holds session.json (the record
// below), events.jsonl (every event, so cursors survive a restart) and out/,
// the artifacts, which is all the API can reach.
type session struct {
	id  string
	dir *os.Root // the session folder
	out *os.Root // its out/ folder, the artifacts

	// Set at creation, never changed (§6.1: config is immutable).
	idea            string
	config          Config
	metadata        Metadata
	clientRequestID string
	createdAt       time.Time

	mu         sync.Mutex // guards the fields below and serializes writes to the session's files
	updatedAt  time.Time
	runs       []*runRecord
	tasks      map[string]*taskRecord // Luigi state: the last completion of each task
	provenance map[string]*provenance // who last wrote each artifact through this server
	active     *activeRun             // non-nil exactly while a run is running
	events     []storedEvent          // events[i].Seq == i+1
	changed    chan struct{}          // closed and replaced on every event, to wake long-polls
}

// runRecord is a run as session.json keeps it.
type runRecord struct {
	ID         string    `json:"run_id"`
	Target     string    `json:"target"`
	State      string    `json:"state"`
	Phase      string    `json:"phase"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	StopReason string    `json:"stop_reason,omitempty"`
	Failure    *Failure  `json:"failure,omitempty"`
	Done       int       `json:"tasks_done"`
	Total      int       `json:"tasks_total"`
}

// taskRecord is what resume compares against: the hashes of the inputs a
// task last completed from, and of the output it wrote. Stale is set by an
// explicit invalidation and survives a stop, until the task runs again.
type taskRecord struct {
	RunID       string            `json:"run_id,omitempty"`
	Inputs      map[string]string `json:"inputs,omitempty"`
	Output      string            `json:"output_sha256,omitempty"`
	CompletedAt time.Time         `json:"completed_at,omitzero"`
	Stale       bool              `json:"stale,omitempty"`
}

// provenance is who last wrote an artifact: a task of a run, or a user edit.
type provenance struct {
	Task       string    `json:"task,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	EditReason string    `json:"edit_reason,omitempty"`
	SHA256     string    `json:"sha256"`
	UpdatedAt  time.Time `json:"updated_at"`
}

type sessionFile struct {
	Version         int                    `json:"version"`
	ID              string                 `json:"session_id"`
	Idea            string                 `json:"idea"`
	Config          Config                 `json:"config"`
	Metadata        Metadata               `json:"metadata"`
	ClientRequestID string                 `json:"client_request_id,omitempty"`
	CreatedAt       time.Time              `json:"created_at"`
	UpdatedAt       time.Time              `json:"updated_at"`
	Runs            []*runRecord           `json:"runs"`
	Tasks           map[string]*taskRecord `json:"tasks"`
	Provenance      map[string]*provenance `json:"provenance"`
}

type storedEvent struct {
	Seq  int64          `json:"seq"`
	TS   time.Time      `json:"ts"`
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

func (s *session) createResponse() CreateResponse {
	return CreateResponse{SessionID: s.id, OutputDirURI: outputDirURI(s.id), CreatedAt: formatTime(s.createdAt)}
}

func (s *session) lastRun() *runRecord {
	if len(s.runs) == 0 {
		return nil
	}
	return s.runs[len(s.runs)-1]
}

// save writes session.json; s.mu must be held.
func (s *session) save() error {
	sf := sessionFile{
		Version: 1, ID: s.id, Idea: s.idea, Config: s.config, Metadata: s.metadata,
		ClientRequestID: s.clientRequestID, CreatedAt: s.createdAt, UpdatedAt: s.updatedAt,
		Runs: s.runs, Tasks: s.tasks, Provenance: s.provenance,
	}
	data, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", sessionFileName, err)
	}
	return writeAtomic(s.dir, sessionFileName, append(data, '\n'), s.updatedAt, true)
}

// emit records an event: in memory, in events.jsonl and as a line of
// run.log (§14), then wakes long-polls. s.mu must be held. A failure to
// persist is logged, not returned: the event still reaches live readers,
// and the state change it reports has already happened.
func (e *Engine) emit(s *session, typ string, data map[string]any) {
	ev := storedEvent{Seq: int64(len(s.events)) + 1, TS: e.now(), Type: typ, Data: data}
	s.events = append(s.events, ev)
	s.updatedAt = ev.TS
	if line, err := json.Marshal(ev); err != nil {
		e.opts.Logger.Error("planexe: encode event", "session_id", s.id, "err", err)
	} else if err := appendLine(s.dir, eventsFileName, append(line, '\n')); err != nil {
		e.opts.Logger.Error("planexe: persist event", "session_id", s.id, "err", err)
	}
	payload, _ := json.Marshal(data) // a map of JSON values always encodes
	logLine := fmt.Sprintf("%s %s %s\n", formatTime(ev.TS), typ, payload)
	if err := appendLine(s.out, runLogPath, []byte(logLine)); err != nil {
		e.opts.Logger.Error("planexe: append to run.log", "session_id", s.id, "err", err)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// loadEvents reads events.jsonl. A torn last line (the process died while
// appending) is dropped; anything else out of order is an error.
func (s *session) loadEvents() error {
	raw, err := s.dir.ReadFile(eventsFileName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", eventsFileName, err)
	}
	lines := bytes.Split(raw, []byte("\n"))
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var ev storedEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			if i == len(lines)-1 {
				break
			}
			return fmt.Errorf("parse %s line %d: %w", eventsFileName, i+1, err)
		}
		if ev.Seq != int64(len(s.events))+1 {
			return fmt.Errorf("%s line %d: sequence %d after %d", eventsFileName, i+1, ev.Seq, len(s.events))
		}
		s.events = append(s.events, ev)
	}
	return nil
}

func cursorOf(seq int64) string { return "cursor_" + strconv.FormatInt(seq, 10) }

// parseCursor accepts "" (the beginning) and the cursors this server issues.
func parseCursor(c string) (int64, bool) {
	if c == "" {
		return 0, true
	}
	n, ok := strings.CutPrefix(c, "cursor_")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 || strconv.FormatInt(seq, 10) != n {
		return 0, false
	}
	return seq, true
}

// Events returns the events after req.Since (§7.1). Cursors are
// "cursor_<n>" with n counting the session's events from 1, so they are
// strictly increasing, survive a restart, and a client that polls with the
// cursor it was given sees every event exactly once.
func (e *Engine) Events(ctx context.Context, user string, req EventsRequest) (EventsResponse, error) {
	since, ok := parseCursor(req.Since)
	if !ok {
		return EventsResponse{}, newError(CodeInvalidArgument, map[string]any{"since": clip(req.Since)},
			"since %q is not a cursor this server issued", clip(req.Since))
	}
	if req.WaitMS < 0 {
		return EventsResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "wait_ms"}, "wait_ms must not be negative")
	}
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return EventsResponse{}, err
	}
	wait := time.Duration(min(req.WaitMS, maxWaitMS)) * time.Millisecond
	var timer <-chan time.Time
	for {
		s.mu.Lock()
		latest := int64(len(s.events))
		if since > latest {
			s.mu.Unlock()
			return EventsResponse{}, newError(CodeInvalidArgument, map[string]any{"since": req.Since, "latest": cursorOf(latest)},
				"since %s is ahead of the session's latest event", req.Since)
		}
		if since < latest || wait == 0 {
			resp := EventsResponse{Cursor: cursorOf(since), Events: []Event{}}
			end := min(latest, since+maxEventsPerCall)
			for _, ev := range s.events[since:end] {
				resp.Events = append(resp.Events, Event{Cursor: cursorOf(ev.Seq), TS: formatTime(ev.TS), Type: ev.Type, Data: ev.Data})
			}
			if end > since {
				resp.Cursor = cursorOf(end)
			}
			resp.HasMore = end < latest
			s.mu.Unlock()
			return resp, nil
		}
		changed := s.changed
		s.mu.Unlock()
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-changed:
		case <-timer:
			wait = 0 // answer with what there is
		case <-ctx.Done():
			return EventsResponse{}, internalError("wait for events", ctx.Err())
		case <-e.ctx.Done():
			wait = 0
		}
	}
}

const (
	maxEventsPerCall = 500
	maxWaitMS        = 30000
)
