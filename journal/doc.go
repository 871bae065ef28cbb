// Package journal is Plexus's SQLite adapter: the durable state behind the
// gateway ([plexus.Store], [plexus.StateTx]), the hash-chained activity
// journal that scripts read, the redacted JSONL audit mirror, and the queries
// the CLI runs (`plexus journal`, `plexus journal verify`).
//
// Every activity row goes through one write path, the Record method of the
// transaction [DB.Update] hands out. It redacts the payload ([Redact]) before
// anything is hashed, stored or mirrored, and it shares the caller's
// transaction: a state transition and the row that records it commit
// together or not at all. Concurrent non-durable Updates are group-committed
// (one transaction, one savepoint per caller, one COMMIT and one mirror
// write per batch) without weakening that: see group.go.
//
// The package must never store raw call inputs or outputs, tokens, PATs,
// enrollment codes, connection-keys or resolved secret values: credentials
// are kept as keyed hashes computed by the caller, and [Redact] strips what
// a careless payload carries. It must never open or close the database files
// with os calls while SQLite has them open (closing any descriptor of a file
// drops that process's POSIX locks on it), and it never writes outside the
// database, the audit directory and the anchor file it is given.
//
// # Storage conventions
//
// Timestamps are TEXT in UTC, RFC 3339 with exactly nine fractional digits
// ("2006-01-02T15:04:05.000000000Z"). That is valid RFC 3339 (time.RFC3339Nano
// parses it), and, unlike RFC3339Nano's trimmed output, it is fixed width, so
// text comparison in SQL is time comparison. Optional times are NULL.
// Credential hashes are BLOBs. Lists and objects (verbs, scopes, pending items,
// trust windows, constraints) are JSON text.
//
// The activity chain: each row stores the hash of the row before it
// (prev_hash, "" for the first row) and its own hash,
//
//	hash = hex(HMAC-SHA256(chain key, prev_hash || canonical))
//
// (rows written before the key, up to the boundary in meta
// chain.keyed_after, keep hex(sha256(prev_hash || canonical)); see
// chain.go), and the head is anchored outside the database (anchor.go).
// where prev_hash is the previous row's hex text and canonical is the compact
// JSON object {"ts","trace_id","actor","agent_id","action_type","target",
// "payload"} in that key order, with the column values as stored (payload is
// the payload column's JSON text, compacted), encoded as Go's encoding/json
// does with HTML escaping off. Hashing the stored text, not a re-encoding of
// decoded values, keeps the hash reproducible from the table alone.
package journal
