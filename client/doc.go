// Package client is the HTTP client of a Plexus gateway, for both planes:
// [Agent] performs the agent loop (enroll → handshake → grant → invoke, with
// token refresh and pending-grant waits) so that no agent hand-rolls auth, and
// [Admin] speaks the owner's connection-key-gated /admin/api/* plane.
// Beside them are the words a person reads of what the gateway answers:
// a call's output and narration (render.go), the owner's tables (table.go)
// and journal rows (activity.go), so the command line only wires flags to
// them.
//
// The package holds credentials (a PAT, a connection-key, scoped tokens, the
// session id) and must never log or print them, nor put them in an error
// message: they travel only in request headers and in the agent's own 0600
// files under its [CredStore] directory. It reads no flags, environment or
// $HOME; cmd/plexus decides where the store lives and which address to dial.
package client
