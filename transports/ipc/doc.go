// Package ipc is the wire of the "ipc" transport: the framing and message
// envelope of the OpenSentience Runtime Protocol v1 (Core ↔ Agent), which
// Plexus speaks as Core to agent processes it launches.
//
// # Wire
//
// A frame is a 4-byte unsigned big-endian length followed by that many bytes
// of one UTF-8 JSON object (§2.1); [ReadFrame] and [WriteFrame] enforce it,
// with max_frame_bytes [DefaultMaxFrameBytes] (4 MiB) unless the caller
// passes another limit (§2.2). A frame that breaks the rules is a
// [*FrameError] whose text holds sizes and offsets only, never payload
// bytes, so it can be journaled as is; [FrameError.MustClose] says when the
// connection cannot go on (oversize, truncated).
//
// Each frame carries an [Envelope] (§3): v, type, id, ts, payload, the
// correlation fields, actor and the standard error object. [DecodeEnvelope]
// ignores unknown fields and refuses a missing or mistyped required one with
// an [*EnvelopeError] naming it; [DecodePayload] decodes a payload into the
// structs of §4 ([Hello], [Welcome], [ToolCall], …), ignoring unknown
// payload fields (§6.2). [ErrorReply] builds the structured error an unknown
// message type gets when a reply is expected.
//
// The package must never log or put into an error the session token of
// agent.hello or any payload content. It does no I/O of its own beyond the
// reader and writer it is handed, and it logs nothing.
//
// # Not built yet
//
// This is the codec only. Still to come, in later changes: the unix socket
// listener under PLEXUS_HOME/run (folder 0700, socket 0600); launching an
// agent with PLEXUS_SOCKET and PLEXUS_SESSION_TOKEN in its environment; the
// agent.hello / core.welcome handshake (token check, version negotiation);
// tool registration; calls, streaming, cancellation; heartbeats and health;
// the journaling of refused frames; wiring into cmd/plexus.
package ipc
