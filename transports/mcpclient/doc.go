// Package mcpclient is Plexus as an MCP client: one persistent session per
// configured MCP server (an entry of mcp.json's "mcpServers", stdio or
// Streamable HTTP), exposed as a [plexus.Source] ([Client]) whose entries
// are the server's tools, resources, resource templates and prompts, and a
// [plexus.Transport] of kind mcp ([Transport]) that calls them. It is built
// on the official MCP Go SDK.
//
// # Lifecycle
//
// [Client.Run] owns the session: it starts the server (or opens the HTTP
// session), initializes, lists tools, resources, resource templates and
// prompts (and skills, from a server that declares the skills extension),
// each paged to exhaustion, and keeps the session. A
// notifications/…/list_changed re-lists that primitive (the skills with
// the resources); when what
// [Client.Scan] returns changes, Options.OnChange is called. When the
// session is lost (the process died, the HTTP session is gone, a keep-alive
// ping went unanswered) Run reconnects with a backoff doubling from
// Options.MinBackoff to Options.MaxBackoff and lists again; meanwhile Scan
// keeps the last listing, [Client.Health] is unavailable with the reason,
// and calls fail with source_unavailable. Options.OnHealth hears each
// change of status. A url server that needs the owner to sign in
// (Options.SignIn: its OAuth handler could get no token) is not retried:
// Health is unavailable with NeedsSignIn and the login command, calls fail
// with source_unavailable naming it, and nothing is sent until
// [Client.SignedIn]. When Run's context ends it closes the session: stdin
// closed, then SIGTERM, then SIGKILL, each after Options.StopGrace, and
// whatever the server left in its process group killed.
//
// # How MCP primitives become entries
//
// Every entry is kind capability, transport mcp, source "mcp:<server>",
// with mcp {serverId: <server>, protocolVersion: <negotiated>, primitive,
// originName, raw} where raw is the listed object byte for byte. <server>
// is the configured name, a slug ([ValidName]).
//
//	tool      id mcp.<server>.<name>; label title, else annotations.title,
//	          else name; describe description; io.input inputSchema and
//	          io.output outputSchema, verbatim; originName the name.
//	resource  id mcp.<server>.resource.<name>; grants read; io.input an
//	          empty object; originName the URI.
//	template  (resources/templates/list) id mcp.<server>.template.<name>;
//	          grants read; io.input an object of the template's variables,
//	          each a required string; mcp.primitive "resource" and
//	          originName the uriTemplate. Only RFC 6570 level 1 templates
//	          ({var}, no operator or modifier) are projected; others are
//	          left out and logged.
//	prompt    id mcp.<server>.prompt.<name>; grants read; io.input an object
//	          of the prompt's arguments, each a string, the required ones
//	          required, no others; originName the name.
//	skill     (skills/list, when the server declares the skills extension,
//	          SEP-2640; skills.go) id mcp.<server>.skill.<frontmatter name>;
//	          grants read; io.input an optional file, one of the paths the
//	          skill's entry lists; originName the URI of its SKILL.md.
//
// A missing description becomes a line naming the primitive. A tool's
// grant follows its explicit annotations only: readOnlyHint true is read;
// otherwise destructiveHint true or openWorldHint true is execute;
// anything else, an unannotated tool included, is write. (MCP's defaults
// would make every unannotated tool destructive and open-world, so
// execute, which is never a standing grant; write is what an unknown
// effect is, and the owner sees the verb in every decision.)
//
// In a name, ASCII letters, digits, '_', '-' and '.' are kept and every
// other byte of its UTF-8 becomes '~' and two upper-case hex digits ("get
// weather" → get~20weather); the mapping is one-to-one. Resource names
// need not be unique: a resource or template whose id is already taken
// (by another resource, or a tool named "resource.x") gets "~" and the
// first 8 hex digits of the sha256 of its URI (or template) appended. Any
// other collision within a server (a tool named "prompt.x" against a
// prompt x, two tools of one name) keeps the first in the order tools,
// resources, templates, prompts, and logs the other. Tools the SDK
// considers invalid are left out as it leaves them out.
//
// [Client.Definitions] returns every projected primitive with the sha256 of
// its canonical form ([Definition]). [Pinned] is the source the registry
// sees: the client's entries less the tools its [PinCheck] holds (the
// gateway holds a tool whose definition changed since the owner approved
// it), so a held entry is neither listed nor routed.
//
// # Calls
//
// [Transport.Dispatch] branches on the route's primitive: tools/call with
// the input as arguments, resources/read of the URI (a template's, expanded
// from the input), prompts/get with the input as string arguments, and for
// a skill resources/read of its SKILL.md (or the listed file the input
// names), answered only once the content matches the skill's listing. Every
// call carries a progress token, and each notifications/progress for it is
// relayed through DispatchContext.Report (channel "progress"), before the
// result. When the caller's context ends first the server is sent
// notifications/cancelled.
//
// The server's result is returned byte for byte in MCPResult: a tool's
// content[] with structuredContent and isError, a resource's contents[], a
// prompt's messages[]; Data is a tool's structuredContent when there is
// one. A skill's file is the exception: its MCPResult is rebuilt from the
// one content item that passed verification (skills.go). The codes:
//
//	result                          OK true
//	tool result with isError true   mcp_tool_error (MCPResult still holds it)
//	no session up (or no client)    source_unavailable
//	the server needs sign-in        source_unavailable naming plexus mcp login <server>
//	JSON-RPC error from the server  transport_error with its message, detail {"code": n}
//	a tool result the SDK could
//	not read (not an object, an
//	unknown content block type)     transport_error
//	caller cancelled or timed out   transport_error (the server was told)
//	session lost during the call    transport_error
//	a non-string prompt argument
//	or template variable            schema_validation_failed
//	a skill's file the listing
//	does not name                   schema_validation_failed
//	a skill's file that fails its
//	size, digest or frontmatter     transport_error, detail.verification;
//	check, or a refused skill       nothing asked of the server once refused
//
// Beside calls, the transport is a [plexus.Completer] (completion/complete
// for a prompt or template entry, the ref made from its route) and a
// [plexus.ResourceSubscriber] (resources/subscribe, once per URI however
// many callers watch it, and again on each new session after a reconnect;
// notifications/resources/updated fanned out to them; the last one's
// leaving unsubscribes).
//
// # Raw bytes
//
// The SDK decodes results into its types, which drop what it does not
// model, so the bytes are taken where its JSON-RPC layer meets the wire:
// Plexus's own Connection for stdio (stdio.go), the http.Client's
// RoundTripper for Streamable HTTP; capture.go says how and why. Should the
// SDK answer from its own cache (SEP-2549 TTLs, which only some servers
// set) no bytes go over the wire, and the typed result is re-marshalled
// instead. A tools/call on a stdio session below 2026-07-28 does not go
// through the SDK at all: Plexus writes it on the session's connection and
// its reader hands the raw answer to the caller (passthrough.go), so that
// result is never decoded into the SDK's types. Over Streamable HTTP such a
// call is one POST of Plexus's own in the SDK's session, its answer read
// off the response by the caller (passhttp.go).
//
// # Never
//
// The package never runs a server through a shell, never hands a child more
// than [Options.Env] (the platform's base environment) and its entry's env,
// and never lets a configured env or header
// value (nor a URL's query) into a log, an error, a health detail or an
// entry; text from the server bound for an error or a log is redacted of
// them. It never logs an input or a result, and leaves no process or
// goroutine behind when Run returns. Plain http is accepted only to a
// loopback host. It runs on Linux and macOS.
package mcpclient
