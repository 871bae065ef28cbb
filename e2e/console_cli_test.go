package e2e

// `plexus console --print`: the built command asks the running daemon for
// a one-time sign-in link.

import (
	"net/http"
	"strings"
	"testing"
)

func TestCLIConsolePrint(t *testing.T) {
	e, td := newCLIEnv(t)
	r := e.ok("console", "--print")
	link := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(link, td.BaseURL()+"/console/signin?code=") || strings.Contains(link, "\n") {
		t.Fatalf("plexus console --print printed %q, want one sign-in link on %s", r.stdout, td.BaseURL())
	}
	c := browser(t)
	if resp, _ := do(t, c, "GET", link, nil, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the printed link: status %d, want 303 into the console", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", td.BaseURL()+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("signed in by the printed link, pending answers %d", resp.StatusCode)
	}
	if resp, _ := do(t, browser(t), "GET", link, nil, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the printed link used twice: status %d, want 403", resp.StatusCode)
	}

	td.stop()
	if r := e.run("console", "--print"); r.code != exitError || !strings.Contains(r.stderr, "not running") {
		t.Errorf("with the daemon stopped: %s", r)
	}
}
