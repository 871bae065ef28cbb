// Package e2e holds the end-to-end suites of Plexus, in its test files: the
// real daemon (package daemon, started in-process where a suite needs its
// clock or options) driven over HTTP, and the real plexus binary, built once
// per test binary (with -race when the tests run with it), for the command
// line stories and the crash and kill suites.
package e2e
