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
// agent.hello or any payload content. The codec does no I/O of its own
// beyond the reader and writer it is handed; only [Server] touches the file
// system and the network, and it logs at debug level only, through the
// logger it is given.
//
// # Server
//
// [Server] is Core's end: it binds the unix socket (folder 0700, socket
// 0600, a stale socket replaced only when nothing answers on it), runs the
// agent.hello / core.welcome handshake (§4.1: token checked through an
// [Authenticator], agent_id bound to the token's provider, highest common
// version, a fresh random session_id), records agent.heartbeat per session
// ([Server.Sessions]), reports refused frames and hellos through
// [ServerOptions.OnRefused] without payload bytes or the token, and on
// Close sends core.goodbye to welcomed sessions. Messages it does not handle
// yet get a structured error instead of silence: [CodeUnsupported] for the
// agent's tool messages, [CodeUnexpectedType] for a type out of place,
// [CodeUnknownType] for an unknown one.
//
// # Not built yet
//
// Still to come, in later changes: choosing the socket path under
// PLEXUS_HOME/run and issuing session tokens; launching an agent with
// PLEXUS_SOCKET and PLEXUS_SESSION_TOKEN in its environment; tool
// registration; calls, streaming, cancellation; acting on missed
// heartbeats (marking a session unhealthy, restarting the agent) and
// core.ping; wiring into cmd/plexus, where OnRefused is connected to the
// journal.
package ipc
