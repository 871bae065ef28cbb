package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTermSafeError: a sign-in error quoting an authorization server's
// text reaches the owner's terminal with no control character (no escape
// sequence retitles or clears it), and keeps its chain for the exit status.
func TestTermSafeError(t *testing.T) {
	inner := errors.New("no")
	err := termSafe(fmt.Errorf("sign in: \x1b]0;owned\x07\x1b[2J %w", inner))
	if strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Errorf("message %q holds control characters", err.Error())
	}
	if !errors.Is(err, inner) {
		t.Errorf("the chain is lost")
	}
}
