package planexe

// The request and response shapes of spec §6 and §7.1, field for field.
// Fields the spec does not name are marked "extension" and are optional on
// input and additive on output (§16.2: clients ignore unknown fields).

// Config is a session's immutable run configuration (§6.1). The stand-in
// planner uses no model, so PlannerModel, ValidatorModel and Luigi are
// recorded (in luigi_state.json) but do not change what is produced.
type Config struct {
	PlannerModel   string  `json:"planner_model,omitempty" jsonschema:"model that would write the plan (recorded only)"`
	ValidatorModel string  `json:"validator_model,omitempty" jsonschema:"model that would audit the plan (recorded only)"`
	MaxRuntimeSec  float64 `json:"max_runtime_sec,omitempty" jsonschema:"a run still running after this many seconds fails; default 7200"`
	Luigi          *Luigi  `json:"luigi,omitempty"`
}

// Luigi holds the Luigi parameters of a session's [Config].
type Luigi struct {
	Workers   int    `json:"workers,omitempty" jsonschema:"Luigi workers (recorded; the stand-in runs tasks one at a time)"`
	Scheduler string `json:"scheduler,omitempty" jsonschema:"Luigi scheduler (recorded)"`
}

// Metadata is a session's owner and tags (§6.1, §12.2).
type Metadata struct {
	UserID string   `json:"user_id,omitempty" jsonschema:"owner of the session; callers asserting another identity are refused"`
	Tags   []string `json:"tags,omitempty"`
}

// CreateRequest is the input of planexe.session.create.
type CreateRequest struct {
	Idea     string    `json:"idea" jsonschema:"what to plan"`
	Config   *Config   `json:"config,omitempty"`
	Metadata *Metadata `json:"metadata,omitempty"`
	// ClientRequestID makes create idempotent (§6.1's optional extension).
	ClientRequestID string `json:"client_request_id,omitempty" jsonschema:"idempotency key: a repeated create with the same key returns the same session"`
}

// CreateResponse is the output of planexe.session.create.
type CreateResponse struct {
	SessionID    string `json:"session_id"`
	OutputDirURI string `json:"output_dir_uri"`
	CreatedAt    string `json:"created_at"`
}

// StartInputs are the optional inputs of a start request.
type StartInputs struct {
	SeedArtifacts []string `json:"seed_artifacts,omitempty" jsonschema:"artifact URIs written before start that the run must use as given and never regenerate"`
}

// StartRequest is the input of planexe.session.start.
type StartRequest struct {
	SessionID string       `json:"session_id"`
	Target    string       `json:"target,omitempty" jsonschema:"final DAG output; default build_plan_and_validate"`
	Inputs    *StartInputs `json:"inputs,omitempty"`
}

// RunResponse is the output of planexe.session.start and planexe.session.resume.
type RunResponse struct {
	RunID string `json:"run_id"`
	State string `json:"state"`
}

// StatusRequest is the input of planexe.session.status.
type StatusRequest struct {
	SessionID string `json:"session_id"`
}

// CurrentTask is the task a running run is working on.
type CurrentTask struct {
	Name string  `json:"name"`
	Pct  float64 `json:"pct"`
}

// Progress is a run's progress; Overall is within [0,1] (§6.3).
type Progress struct {
	Overall     float64      `json:"overall"`
	CurrentTask *CurrentTask `json:"current_task,omitempty"`
}

// Timing is a run's timing. EndedAt is an extension.
type Timing struct {
	StartedAt  string  `json:"started_at"`
	ElapsedSec float64 `json:"elapsed_sec"`
	EndedAt    string  `json:"ended_at,omitempty"`
}

// ArtifactRef names an artifact in a status response.
type ArtifactRef struct {
	Path        string `json:"path"`
	ArtifactURI string `json:"artifact_uri"`
	Kind        string `json:"kind"`
	UpdatedAt   string `json:"updated_at"`
}

// Failure says why a run failed (extension of the status response).
type Failure struct {
	Task    string `json:"task,omitempty"`
	Message string `json:"message"`
}

// StatusResponse is the output of planexe.session.status. Before the first
// run, RunID, Phase and Timing are absent and State is "created", the session
// state of §5.1, since no run state applies yet.
type StatusResponse struct {
	SessionID       string        `json:"session_id"`
	RunID           string        `json:"run_id,omitempty"`
	State           string        `json:"state"`
	Phase           string        `json:"phase,omitempty"`
	Progress        Progress      `json:"progress"`
	Timing          *Timing       `json:"timing,omitempty"`
	LatestArtifacts []ArtifactRef `json:"latest_artifacts"`
	Warnings        []string      `json:"warnings"`

	SessionState string   `json:"session_state"`         // extension: created | active
	Target       string   `json:"target,omitempty"`      // extension
	StopReason   string   `json:"stop_reason,omitempty"` // extension: user_request | server_shutdown | interrupted
	Failure      *Failure `json:"failure,omitempty"`     // extension: set when state is failed
}

// StopRequest is the input of planexe.session.stop.
type StopRequest struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id,omitempty" jsonschema:"the run to stop; default the running one"`
	Mode      string `json:"mode,omitempty" jsonschema:"graceful (default: finish the current task) or immediate (abandon it)"`
}

// StopResponse is the output of planexe.session.stop.
type StopResponse struct {
	State string `json:"state"`
	RunID string `json:"run_id"` // extension
}

// Invalidate names what a resume must recompute.
type Invalidate struct {
	Artifacts []string `json:"artifacts,omitempty" jsonschema:"artifact URIs whose dependent tasks become stale"`
	Tasks     []string `json:"tasks,omitempty" jsonschema:"task names that become stale, with everything downstream"`
}

// ResumeRequest is the input of planexe.session.resume.
type ResumeRequest struct {
	SessionID    string      `json:"session_id"`
	Target       string      `json:"target,omitempty" jsonschema:"final DAG output; default the last run's target"`
	ResumePolicy string      `json:"resume_policy,omitempty" jsonschema:"luigi_up_to_date (the default and only policy)"`
	Invalidate   *Invalidate `json:"invalidate,omitempty"`
}

// ListRequest is the input of planexe.artifact.list.
type ListRequest struct {
	SessionID       string `json:"session_id"`
	Path            string `json:"path,omitempty" jsonschema:"folder relative to the session output root; empty for the root"`
	IncludeMetadata *bool  `json:"include_metadata,omitempty" jsonschema:"include size, updated_at, content_type, kind and sha256; default true"`
}

// Entry is one entry of a list response.
type Entry struct {
	Type        string `json:"type"`
	Path        string `json:"path"`
	ArtifactURI string `json:"artifact_uri"`
	Size        *int64 `json:"size,omitempty"`
	UpdatedAt   string `json:"updated_at,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Kind        string `json:"kind,omitempty"`
	SHA256      string `json:"sha256,omitempty"`

	// Extensions: which task and run last produced the file, or the reason of
	// the user edit that last wrote it.
	Task       string `json:"task,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	EditReason string `json:"edit_reason,omitempty"`
}

// ListResponse is the output of planexe.artifact.list.
type ListResponse struct {
	Entries []Entry `json:"entries"`
}

// Range is a byte range of an artifact.
type Range struct {
	Start  int64 `json:"start"`
	Length int64 `json:"length,omitempty" jsonschema:"bytes to read; default and maximum the server's per-call limit"`
}

// ReadRequest is the input of planexe.artifact.read.
type ReadRequest struct {
	ArtifactURI string `json:"artifact_uri"`
	Range       *Range `json:"range,omitempty"`
}

// ReadResponse is the output of planexe.artifact.read. SHA256 is always the
// hash of the whole artifact, so a range read can feed a locked write.
type ReadResponse struct {
	ArtifactURI string `json:"artifact_uri"`
	ContentType string `json:"content_type"`
	SHA256      string `json:"sha256"`
	Content     string `json:"content"`

	Size            int64  `json:"size"`                       // extension: the whole artifact
	Range           Range  `json:"range"`                      // extension: the range actually returned
	EOF             bool   `json:"eof"`                        // extension: the range reached the end
	ContentEncoding string `json:"content_encoding,omitempty"` // extension: "base64" when the bytes are not UTF-8
}

// Lock is the optimistic lock of a write.
type Lock struct {
	ExpectedSHA256 string `json:"expected_sha256,omitempty" jsonschema:"the write fails with CONFLICT unless the artifact's sha256 is this"`
}

// WriteRequest is the input of planexe.artifact.write.
type WriteRequest struct {
	ArtifactURI string `json:"artifact_uri"`
	Content     string `json:"content"`
	EditReason  string `json:"edit_reason,omitempty"`
	Lock        *Lock  `json:"lock,omitempty"`
}

// WriteResponse is the output of planexe.artifact.write. Updated is false
// when the artifact already held exactly this content (a retried write).
type WriteResponse struct {
	Updated   bool   `json:"updated"`
	SHA256    string `json:"sha256"`
	UpdatedAt string `json:"updated_at"`
}

// EventsRequest is the input of planexe.session.events.
type EventsRequest struct {
	SessionID string `json:"session_id"`
	Since     string `json:"since,omitempty" jsonschema:"cursor of the last event seen; empty for the beginning"`
	// WaitMS turns the poll into a long-poll (§7.1 allows either).
	WaitMS int `json:"wait_ms,omitempty" jsonschema:"when no event is newer than since, wait up to this many milliseconds (max 30000) for one"`
}

// Event is one event of §7 with its cursor (§4.1 lists cursor as a key
// property of an event).
type Event struct {
	Cursor string         `json:"cursor"`
	TS     string         `json:"ts"`
	Type   string         `json:"type"`
	Data   map[string]any `json:"data"`
}

// EventsResponse is the output of planexe.session.events. Cursor is the
// cursor of the last event returned, or since when none is newer.
type EventsResponse struct {
	Cursor  string  `json:"cursor"`
	Events  []Event `json:"events"`
	HasMore bool    `json:"has_more"` // extension: more events are waiting; poll again at once
}
