// Package inbox is files as API (docs/files-as-api.md): every decision
// waiting for the owner is a markdown file in PLEXUS_HOME/inbox/, and moving
// it decides it.
//
// Two halves. The file format is pure and deterministic ([Render], [Parse],
// [Changes], [Annotate], [Stamp]): the same decision renders to the same
// bytes, so files diff well and the daemon recognizes (by [Sum]) a file it
// wrote itself. The [Reconciler] is the I/O half: it compares what the four
// folders hold with what the journal holds and applies the difference
// (reconcile.go: the loop and its hints; transition.go: what each state of a
// decision and its file means; folder.go: reading, writing, recording and
// removing files, in an order a crash cannot break). The same decision for a
// terminal (plexus show, pending, approve and reject) is in term.go and
// reach.go, quoted and escaped for a terminal rather than for Markdown.
//
// The package never decides anything itself: approvals, denials and
// withdrawals go through the gateway's single decision function and
// revocations through the gateway, handed in as a [Decider]. It never
// overwrites a file the owner changed since the daemon wrote it, and never
// deletes a file it cannot parse. The owner's words and the agent's are kept
// apart: the agent's purpose is only ever shown quoted, never merged into the
// gateway's narration.
package inbox
