// Package plexustest holds the parts every package's tests share: a real
// journal.db in a test's temp dir, opened the way the daemon opens it, a
// scaffolded PLEXUS_HOME, and one settable clock.
//
// Only tests import it. It never fakes what the standards ask to be real
// (SQLite, files, sockets, children): it builds the real thing in
// tb.TempDir() and closes it at cleanup. Where a component runs its own
// timers, a test drives them with testing/synctest instead of a clock.
//
// It imports journal and scaffold, so neither of those packages' own
// (package-internal) tests can use it; they keep their own helpers.
package plexustest
