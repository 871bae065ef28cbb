// Package planexe is an MCP server implementing the PlanExe MCP Interface
// Specification v1.0 (specs/planexe-mcp-interface-v1.txt) with a
// deterministic stand-in for PlanExe's planner: no language model, only
// text transformations, so that every behaviour of the interface (long
// runs, progress, stop, edit, incremental resume, sha256 locking, events)
// can be exercised and tested exactly. It is the worked long-running MCP
// source Plexus is tested against.
//
// It must never expose a file outside a session's output folder, and never
// block a tool call on a run (only stop waits, for at most one task).
//
// # Layout
//
// [Engine] holds the sessions under one root folder and runs them;
// [NewServer] exposes it as the nine tools of §6 and §7.1 (the Tool*
// constants); cmd/planexe serves it over stdio or Streamable HTTP; package
// contract holds the §17 contract suite, runnable against any transport.
//
// # Results and errors
//
// A successful call returns the spec's response object as structuredContent
// and the same JSON as a text content. A refused call is a tool result, not a
// JSON-RPC error: isError is true, structuredContent is
//
//	{"error": {"code": "CONFLICT", "message": "...", "details": {...}}}
//
// (§11) and the text content carries the same JSON. The codes are those of
// §11.1, plus INVALID_ARGUMENT for a malformed request none of them names
// (a missing idea, a negative range, an unknown stop mode or resume policy,
// arguments of the wrong JSON type, a cursor this server never issued).
// Arguments are not validated against the advertised input schema before
// the handler runs, so that a bad target is INVALID_TARGET rather than a
// schema error; unknown argument fields are ignored (§16.2). The output
// schemas describe successful results only.
//
// # Runs and the state machine (§5)
//
//   - start moves a created session to running (run_0001). A start while a
//     run is running is RUN_ALREADY_ACTIVE; a start on a session that
//     already has runs is CONFLICT (completed → running is invalid, and
//     stopped → running goes through resume).
//   - resume starts the next run (run_0002, …) from stopped, completed or
//     failed; on a session without runs it is RUN_NOT_FOUND; while a run is
//     running, RUN_ALREADY_ACTIVE.
//   - stop without a running run is RUN_NOT_ACTIVE; naming a run the
//     session never had is RUN_NOT_FOUND. Stop returns once the run has
//     stopped, so "stopping" is never observed: mode "graceful" (the
//     default) lets the current task finish, "immediate" abandons it. No
//     output is ever half-written (files are replaced by rename).
//   - A run fails when a task cannot read its inputs (an edited plan.json
//     that is no longer JSON, say) or runs past config.max_runtime_sec; the
//     failure is written to run_error.json, and the run is resumable.
//   - Close (or the binary's SIGINT/SIGTERM) stops every run with reason
//     server_shutdown; a run found "running" on disk at start-up (a crash)
//     becomes stopped with reason interrupted. Both resume.
//
// # Targets, phases and the planner (§8)
//
// Nine tasks, each writing one artifact from the ones before it:
//
//	SetupPrompt            initializing     → prompt.md              (the idea)
//	ExtractAssumptions     generating_plan  → assumptions.md         ← prompt.md
//	DraftOutline           generating_plan  → outline.md             ← prompt.md, assumptions.md
//	WriteDetailedPlan      generating_plan  → plan.md                ← outline.md, assumptions.md
//	StructurePlan          generating_plan  → plan.json              ← plan.md
//	SelfAudit              validating       → audit.json             ← plan.json, assumptions.md
//	WriteValidationReport  validating       → validation_report.html ← audit.json, plan.md
//	ExportPlan             exporting        → plan.html              ← plan.md, plan.json
//	ExportSummary          exporting        → summary.md             ← plan.json, audit.json
//
// build_plan runs up to ExportPlan, validate_plan up to
// WriteValidationReport, build_plan_and_validate all nine; a run ends in
// phase finalizing. Each task takes [Options.TaskDelay].
//
// # Incrementality (§9)
//
// A task is up to date when its output exists and the sha256 of each input
// is the one it last ran from (kept in session.json and mirrored in the
// luigi_state.json artifact). Editing an artifact therefore recomputes
// exactly the tasks downstream of it, and keeps the edit itself. An
// artifact in resume's invalidate.artifacts makes the tasks that depend on
// it stale; a task in invalidate.tasks is stale with everything downstream
// (an unknown task name is INVALID_TARGET). Staleness persists until the
// task runs, even across a stop. An output written by the user before
// start, or listed in start's inputs.seed_artifacts, is used as given.
// Which tasks a run recomputed is visible as task_started events (carrying
// run_id and the reason) and in artifact.list's extension fields task and
// run_id.
//
// # Artifacts (§6.6–§6.8, §10, §12)
//
// Artifact URIs are planexe://sessions/<session_id>/out/<path>. Paths are
// relative, "/"-separated segments of [A-Za-z0-9._-], never ".", ".." or a
// dot name; URIs are never percent-decoded, so any escape is refused. Files
// are reached through [os.Root], and a symlink anywhere on the path is
// refused. All of these answer INVALID_ARTIFACT_URI, as does a URI naming
// nothing. Writes are refused with RUNNING_READONLY while a run is running
// (the strict policy of §10.2), with CONFLICT when lock.expected_sha256 is
// not the artifact's sha256, and with PERMISSION_DENIED for the server's
// own run.log, luigi_state.json and run_error.json. Every write emits
// artifact_updated. Reads take a byte range; the sha256 is always the whole
// artifact's, and a range whose bytes are not UTF-8 comes back base64 with
// content_encoding "base64".
//
// # Events (§7)
//
// Every event is kept, in memory and in the session's events.jsonl, with the
// cursor cursor_<n> (n counts the session's events from 1), so cursors are
// strictly increasing and survive a restart; each event carries its own
// cursor. session.events returns at most 500 events after since, and with
// wait_ms long-polls. The server sends no MCP progress notifications: every
// call answers at once (start is asynchronous by §6.2), and progress lives
// in status and progress_updated events, which also reach a client that
// reconnects.
//
// # Identity (§12.2)
//
// A caller asserts an identity in a tool call's _meta["planexe/user_id"]
// ([MetaUserID]), as a gateway in front of the server would. A session
// created with one belongs to it: another identity gets PERMISSION_DENIED.
// A caller asserting none is the local owner and may use every session,
// unless [Options.RequireIdentity]. [Options.RedactPrompts] keeps the idea
// out of the event stream (§12.3).
package planexe
