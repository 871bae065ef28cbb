//go:build race

package e2e

// raceEnabled: this test binary runs with the race detector, so the plexus
// binary the suites drive is built with it too.
const raceEnabled = true
