package journal

import (
	"context"
	"fmt"
)

// migrations returns the schema steps in order: migrations()[i] takes the
// database from user_version i to i+1. Steps are append-only; a released step
// is never edited, because databases in the field have already run it. The
// schema is a documented interface (docs/journal.md): scripts read activity.
func migrations() []string {
	return []string{schemaV1, schemaV2, schemaV3, schemaV4, schemaV5, schemaV6, schemaV7, schemaV8, schemaV9}
}

// schemaKeyed is the version whose step keys the activity chain.
const schemaKeyed = 4

// schemaV1 creates everything. Times are fixed-width RFC 3339 UTC text (see
// the package doc), credential hashes BLOBs, structured fields JSON text.
const schemaV1 = `
CREATE TABLE agents (
	id          TEXT PRIMARY KEY,
	label       TEXT NOT NULL DEFAULT '',
	created_at  TEXT NOT NULL,
	pat_hash    BLOB UNIQUE,
	enrolled_at TEXT,
	revoked_at  TEXT
);

-- Deferred, so a transaction may write a code before its agent.
CREATE TABLE enroll_codes (
	hash        BLOB PRIMARY KEY,
	agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
	created_at  TEXT NOT NULL,
	expires_at  TEXT NOT NULL,
	consumed_at TEXT,
	trace_id    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX enroll_codes_agent ON enroll_codes(agent_id);

CREATE TABLE sessions (
	id             TEXT PRIMARY KEY,
	agent_id       TEXT NOT NULL DEFAULT '',
	kind           TEXT NOT NULL,
	client_name    TEXT NOT NULL DEFAULT '',
	client_version TEXT NOT NULL DEFAULT '',
	created_at     TEXT NOT NULL,
	expires_at     TEXT NOT NULL,
	revoked_at     TEXT,
	key_epoch      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_kind_agent ON sessions(kind, agent_id);

-- One row per (agent, capability): a newer approval replaces the old one.
CREATE TABLE grants (
	id                 TEXT PRIMARY KEY,
	agent_id           TEXT NOT NULL,
	capability_id      TEXT NOT NULL,
	verbs              TEXT NOT NULL,
	provenance         TEXT NOT NULL DEFAULT '',
	sensitivity        TEXT NOT NULL DEFAULT '',
	granted_at         TEXT NOT NULL,
	expires_at         TEXT NOT NULL,
	trust_window       TEXT NOT NULL,
	standing           INTEGER NOT NULL,
	synthesized_for    TEXT NOT NULL DEFAULT '',
	constraint_json    TEXT,
	bundle_id          TEXT NOT NULL DEFAULT '',
	top_level_disabled INTEGER NOT NULL DEFAULT 0,
	pending_id         TEXT NOT NULL DEFAULT '',
	trace_id           TEXT NOT NULL DEFAULT '',
	revoked_at         TEXT,
	used_at            TEXT,
	UNIQUE (agent_id, capability_id)
);

-- The jti registry. The token string itself is never stored.
CREATE TABLE tokens (
	jti              TEXT PRIMARY KEY,
	agent_id         TEXT NOT NULL DEFAULT '',
	session_id       TEXT NOT NULL DEFAULT '',
	scopes           TEXT NOT NULL,
	issued_at        TEXT NOT NULL,
	expires_at       TEXT NOT NULL,
	grant_expires_at TEXT NOT NULL,
	revoked_at       TEXT,
	revoke_reason    TEXT NOT NULL DEFAULT '',
	trace_id         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX tokens_agent ON tokens(agent_id);
CREATE INDEX tokens_session ON tokens(session_id);

-- Which capabilities a token carries (a scope's id, and the workflow a
-- synthesized member scope was made for), so revoking (agent, capability)
-- finds exactly the tokens concerned and no others.
CREATE TABLE token_scopes (
	jti           TEXT NOT NULL REFERENCES tokens(jti) ON DELETE CASCADE,
	capability_id TEXT NOT NULL,
	PRIMARY KEY (jti, capability_id)
) WITHOUT ROWID;
CREATE INDEX token_scopes_capability ON token_scopes(capability_id);

CREATE TABLE pending (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	agent_id   TEXT NOT NULL DEFAULT '',
	session_id TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	decided_at TEXT,
	decided_by TEXT NOT NULL DEFAULT '',
	via        TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	items      TEXT NOT NULL,
	narration  TEXT NOT NULL,
	purpose    TEXT NOT NULL DEFAULT '',
	bundle_id  TEXT NOT NULL DEFAULT '',
	bundle     TEXT,
	trace_id   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX pending_state ON pending(state, created_at);

CREATE TABLE sources (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	provenance TEXT NOT NULL DEFAULT '',
	config     TEXT,
	created_at TEXT NOT NULL
);

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

-- /events log for Last-Event-ID replay. Only the wire body (data) is kept;
-- a token riding to a live subscriber is never written here.
CREATE TABLE events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	ts         TEXT NOT NULL,
	type       TEXT NOT NULL,
	agent_id   TEXT NOT NULL DEFAULT '',
	session_id TEXT NOT NULL DEFAULT '',
	data       TEXT
);

-- The activity journal: the stable interface scripts read. AUTOINCREMENT
-- keeps ids from being reused and leaves the highest id ever issued in
-- sqlite_sequence, which lets verify notice rows deleted from the end.
CREATE TABLE activity (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	ts          TEXT NOT NULL,
	trace_id    TEXT NOT NULL DEFAULT '',
	actor       TEXT NOT NULL,
	agent_id    TEXT NOT NULL DEFAULT '',
	action_type TEXT NOT NULL,
	target      TEXT NOT NULL DEFAULT '',
	payload     TEXT NOT NULL DEFAULT '{}',
	prev_hash   TEXT NOT NULL,
	hash        TEXT NOT NULL
);
CREATE INDEX activity_trace ON activity(trace_id);
CREATE INDEX activity_type ON activity(action_type);
CREATE INDEX activity_agent ON activity(agent_id);
CREATE INDEX activity_ts ON activity(ts);
`

// schemaV2 adds files as API: the record of each decision's file (where
// the daemon last wrote it and its sha256, so an owner's edit is never
// overwritten), whether a request came from the owner's own OS user, and the
// manifest of an agent's extension registration.
const schemaV2 = `
ALTER TABLE pending ADD COLUMN same_user INTEGER NOT NULL DEFAULT 0;
ALTER TABLE pending ADD COLUMN extension TEXT;

CREATE TABLE decision_files (
	pending_id TEXT PRIMARY KEY,
	folder     TEXT NOT NULL,
	sum        TEXT NOT NULL,
	prev       TEXT NOT NULL DEFAULT '[]',
	written_at TEXT NOT NULL
);
CREATE INDEX decision_files_folder ON decision_files(folder);
`

// schemaV3 adds the rug-pull defence of ingested sources: the definition
// pinned for each entry (the hash and the JSON the owner accepted) and the
// changed definition a pending decision puts up.
const schemaV3 = `
ALTER TABLE pending ADD COLUMN definition TEXT;

CREATE TABLE pins (
	source     TEXT NOT NULL,
	entry_id   TEXT NOT NULL,
	hash       TEXT NOT NULL,
	definition TEXT NOT NULL,
	pending_id TEXT NOT NULL DEFAULT '',
	pinned_at  TEXT NOT NULL,
	PRIMARY KEY (source, entry_id)
);
`

// schemaV4 keys the activity chain. It changes no table: its work is Go
// ([tx.keyChain], run in the same transaction), which checks the existing
// plain SHA-256 chain, records where the keyed chain starts (meta
// chain.keyed_after) and records the first keyed row. The version bump also
// keeps older builds, which would append unkeyed rows, from opening the
// journal.
const schemaV4 = ``

// schemaV5 indexes the rows of calls made with an idempotencyKey by the
// keyed hash their payload carries (idemHash), so that a retry finds the
// earlier call's invoke.started row, before dispatch and across restarts.
// The index is partial: rows without an idemHash cost it nothing but the
// WHERE test.
const schemaV5 = `
CREATE INDEX activity_idem ON activity(json_extract(payload, '$.idemHash'))
	WHERE action_type IN ('invoke.started', 'invoke.ok', 'invoke.failed')
	  AND json_extract(payload, '$.idemHash') IS NOT NULL;
`

// schemaV6 trims what each activity row costs to insert. Every index is one
// more B-tree page written to the WAL per commit (a lone /invoke commit wrote
// six pages, one per index plus the table and sqlite_sequence); the journal's
// own queries filter by agent alone, or by agent and action type together
// (the last call of an agent), which one index on (agent_id, action_type)
// serves. A filter on action_type alone is the CLI's, newest first with a
// limit: it scans from the end and stops at the limit. The trace, ts and
// idempotency indexes stay (`--trace`, `--since` and pruning, retries).
const schemaV6 = `
DROP INDEX activity_type;
DROP INDEX activity_agent;
CREATE INDEX activity_agent_type ON activity(agent_id, action_type);
`

// schemaV7 adds the sign-in request of a remote MCP server (OAuth) that a
// pending decision puts up (issue #19).
const schemaV7 = `
ALTER TABLE pending ADD COLUMN signin TEXT;
`

// schemaV8 drops the ts index (issue #16): one B-tree page less written to
// the WAL per commit, which was about a tenth of a lone /invoke's CPU (and
// two pwrites, each of which wakes every inotify watch on the home folder).
// ts is read from the clock inside the write transaction, under SQLite's
// write lock, so rows are appended in time order and id order is ts order:
// a time bound finds its first row by a binary search over ids
// ([firstAtOrAfter]), and pruning's cut-off by scanning from the oldest row
// (the rows it then verifies and deletes). Dropping an index rewrites no
// row: the step frees the index's pages, in one transaction, on a journal
// of any size.
const schemaV8 = `
DROP INDEX IF EXISTS activity_ts;
`

// schemaV9 replaces the (agent_id, action_type) index of version 6 with one
// over agent_id alone (issue #16). Both cost one page per commit, but only
// this one keeps an agent's rows in id order (the rowid ends every index
// key), which is what the journal's agent queries ask for: newest first
// with a limit (`plexus journal --agent`, the last call `plexus clients
// list` shows, the console's last day bounded by id). Over (agent_id,
// action_type) each of those sorted all of the agent's rows first: about
// 2 s for an agent with a million rows, against a millisecond now. An
// agent's rows of one rare type are now found by walking its rows newest
// first; the index on trace_id serves a trace, with or without an agent.
// The step builds the new index from the table, once, at the first start
// of this build: about a second for a million rows.
const schemaV9 = `
DROP INDEX IF EXISTS activity_agent_type;
CREATE INDEX IF NOT EXISTS activity_agent ON activity(agent_id);
`

// migrate applies the steps db has not run yet, each in its own write
// transaction together with the user_version bump, so a crash mid-way leaves
// the database at a clean version.
func (db *DB) migrate(ctx context.Context) error {
	steps := migrations()
	for {
		var v int
		if err := db.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		switch {
		case v > len(steps):
			return fmt.Errorf("migrate: schema version %d is newer than this build knows (%d)", v, len(steps))
		case v == len(steps):
			return nil
		}
		if err := db.applyStep(ctx, v, steps[v]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
}

func (db *DB) applyStep(ctx context.Context, from int, step string) error {
	sqltx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer sqltx.Rollback()
	// Re-read under the write lock: another process may have migrated
	// between our read and BEGIN IMMEDIATE.
	var v int
	if err := sqltx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v != from {
		return nil
	}
	if step != "" {
		if _, err := sqltx.ExecContext(ctx, step); err != nil {
			return err
		}
	}
	t := &tx{ctx: ctx, db: db, q: sqltx, head: new(chainHead)}
	if from+1 == schemaKeyed {
		legacy, err := t.keyChain()
		if err != nil {
			return err
		}
		if err := db.anchorLegacyHead(legacy); err != nil {
			return err
		}
	}
	if _, err := sqltx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", from+1)); err != nil {
		return err
	}
	if err := sqltx.Commit(); err != nil {
		return err
	}
	// Open sets the anchor up after the migrations (openAnchor): this
	// reaches the mirror only.
	db.committed(t.recorded, true)
	return nil
}
