// Package mcpserver is the MCP front door of Plexus: an MCP server, on the
// official MCP Go SDK, that shows an agent's view of the catalog to any MCP
// host as tools, resources, resource templates and prompts (or, for a large
// catalog, as a search tool and a call-by-id tool), and runs each call,
// read and get through the gateway's grants, approvals, journal and events
// like any other call.
//
// It is an edge beside package http: it consumes the gateway only through
// the small interfaces it declares ([Sessions], [Grants], [Invoker],
// [Agents], [Changes], [Upstream]) and knows no registry, transport or journal. Each MCP
// session (or, on the sessionless 2026-07-28 protocol, each agent's client)
// is one Plexus session of the agent whose PAT the request bears. The
// owner's per-agent [View] only ever hides: it never lets an agent reach
// more than its grants do.
//
// It must never answer a request whose bearer it has not matched to a
// Plexus session, never let one agent's PAT use another's MCP session, never
// treat anything the host sends (an elicitation answer included) as an
// approval — approvals belong to the owner's channels — and never log or
// journal a PAT, a token or a call's input.
package mcpserver
