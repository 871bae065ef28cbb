// Package auth holds Plexus's credentials, tokens and trust model: the
// connection-key, PATs and enrollment codes and their keyed hashes; HS256
// scoped tokens; trust windows, sensitivity and the provenance × verb table
// of §4d; the [plexus.Authorizer] policies; content-aware scope constraints;
// and the throttles that slow credential guessing and rate-limit agents.
//
// It is pure logic. It never persists anything (the gateway does, through
// plexus.Store), never reads flags, files or the environment, starts no
// goroutine, and never logs or returns a secret it was handed: callers pass
// secrets in and get hashes, tokens or verdicts out.
package auth
