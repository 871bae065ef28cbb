// Package ipc is the "ipc" transport: Plexus as Core of the OpenSentience
// Runtime Protocol v1 (Core ↔ Agent) toward the tool-provider processes it
// launches. It holds the wire (framing, envelope, payloads), the socket
// [Server], and the [Hub] that launches providers, turns their tools into
// entries and calls them.
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
// The package must never log, journal or put into an error a session token
// or any call content (inputs, outputs, stream chunks). The codec does no
// I/O of its own beyond the reader and writer it is handed; only [Server]
// and [Hub] touch the file system, the network and processes, and they log
// through the logger they are given.
//
// # Server
//
// [Server] is Core's end of the socket: it binds it (folder 0700, socket
// 0600, a stale socket replaced only when nothing answers on it), runs the
// agent.hello / core.welcome handshake (§4.1: token checked through an
// [Authenticator], agent_id bound to the token's provider, highest common
// version, a fresh random session_id, the provider's own max_frame_bytes),
// records agent.heartbeat per session ([Server.Sessions]), reports refused
// frames and hellos through [ServerOptions.OnRefused] without payload bytes
// or the token, hands each welcomed session to a [Handler], and on Close
// sends core.goodbye to welcomed sessions. A type out of place gets
// [CodeUnexpectedType], an unknown one [CodeUnknownType].
//
// # Hub
//
// [Hub] is the rest of Core's side, and the [plexus.Transport] of kind ipc:
//
//   - Launch. Each declared provider ([plexus.ProviderConfig], checked by
//     [ValidateProvider]) is started by [Binaries] (the platform's one way:
//     its own process group, killed with the daemon), never through a
//     shell, with the base environment of [Binaries] plus its config's env and
//     PLEXUS_SOCKET, PLEXUS_PROVIDER_ID and PLEXUS_SESSION_TOKEN: a fresh
//     token from [Tokens] per launch (32 random bytes, bound to the
//     provider, single use, TokenTTL to say hello). Its stdout and stderr go
//     to the debug log, line by line, bounded, with the token redacted.
//   - Tools. A session's agent.tools.register is checked tool by tool
//     (namespacing under the provider's id, the tool name rule, schemas that
//     compile as JSON Schema 2020-12 without fetching anything, size limits,
//     duplicates) and answered with core.tools.registered; replace and
//     agent.tools.unregister are honoured. Each provider's tools are the
//     entries of one managed [plexus.Source], id "ipc:<provider_id>"; tool
//     "<provider_id>/<tool_name>" is entry "ipc.<provider_id>.<tool_name>"
//     with io.input/io.output the tool's schemas and the verbs of
//     [ToolVerbs]. A change calls [HubOptions.OnTools] (the daemon
//     refreshes the registry: a new revision, manifest_changed) before the
//     answer is sent.
//   - Calls. Dispatch sends core.tool.call (call_id, request_id,
//     correlation_id = the trace id, timeout_ms, idempotency_key, caller)
//     and relays agent.tool.stream chunks through the DispatchContext until
//     agent.tool.result. At most MaxInflight calls per connection; the
//     excess is rate_limited. A caller gone or a timeout sends
//     core.tool.cancel and returns at once; a second result for a call is
//     ignored and journaled.
//   - Health. Heartbeats drive the provider's health (ok, degraded;
//     unhealthy and missed heartbeats are unavailable and stop routing);
//     changes go to [HubOptions.OnHealth]. Missed heartbeats, a connection
//     Plexus had to close, or no hello in time stop the process; its
//     restart policy (on-failure, always, never) then applies, with a
//     backoff that doubles from MinBackoff to MaxBackoff.
//   - Stop. Removing a provider, or Run's end, sends core.goodbye and closes
//     the connection, then SIGTERM and SIGKILL to the process group, each
//     after StopGrace.
//
// What the hub observes is journaled through [HubOptions.Note]:
// ipc.refused, ipc.call_canceled, ipc.result_duplicate, provider.started,
// provider.start_failed, provider.connected, provider.disconnected,
// provider.tools_registered, provider.tools_unregistered,
// provider.heartbeat_missed, provider.exited and provider.restarting, with
// ids, reasons, sizes and exit statuses only. docs/ipc.md is the author's
// and owner's guide.
package ipc
