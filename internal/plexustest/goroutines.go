package plexustest

import (
	"runtime"
	"strings"
)

// GoroutinesIn counts the goroutines whose stack holds fn (a function's
// name as a stack trace shows it, e.g. "(*bridge)"): a test's check that
// what it started has ended.
func GoroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
