package e2e

// `plexus console --print`: the built command asks the running daemon for
// a one-time sign-in link.

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCLIConsolePrint(t *testing.T) {
	e, td := newCLIEnv(t)
	r := e.ok("console", "--print")
	link := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(link, td.BaseURL()+"/console/signin?code=") || strings.Contains(link, "\n") {
		t.Fatalf("plexus console --print printed %q, want one sign-in link on %s", r.stdout, td.BaseURL())
	}
	c := browser(t)
	resp, _ := do(t, c, "GET", link, nil, "")
	withPage(c, pageSecret(t, resp))
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

// TestCLIConsoleLinkNotInArgv: `plexus console` hands the desktop's opener
// the path of a private page that forwards to the one-time link, never the
// link itself (a command line is readable by every local user in
// /proc/<pid>/cmdline); the page is gone once the link is used.
func TestCLIConsoleLinkNotInArgv(t *testing.T) {
	e, td := newCLIEnv(t)
	bin := t.TempDir()
	seen := filepath.Join(bin, "seen")
	// The opener records its arguments, then the page's and its folder's
	// modes and the page, then says it is done.
	script := "#!/bin/sh\n{ echo \"argv: $*\"; stat -c '%a' \"$1\" \"$(dirname \"$1\")\"; cat \"$1\"; } > " + seen + ".tmp\nmv " + seen + ".tmp " + seen + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	e.ok("console")
	var b []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(seen); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the opener never ran")
		}
	}
	lines := strings.Split(string(b), "\n")
	argv := lines[0]
	if strings.Contains(argv, "code=") || strings.Contains(argv, "http") {
		t.Fatalf("the opener's command line carries the link: %q", argv)
	}
	if len(lines) < 3 {
		t.Fatalf("the opener saw no page:\n%s", b)
	}
	modes := lines[1:3]
	page := strings.TrimPrefix(argv, "argv: ")
	if !strings.HasPrefix(page, td.Home().Dir+string(filepath.Separator)) || modes[0] != "600" || modes[1] != "700" {
		t.Errorf("the page %s (mode %s, folder %s) is not 0600 in a 0700 folder of PLEXUS_HOME", page, modes[0], modes[1])
	}
	m := regexp.MustCompile(`url=(http://[^"]+)"`).FindStringSubmatch(string(b))
	if m == nil || !strings.HasPrefix(m[1], td.BaseURL()+"/console/signin?code=") {
		t.Fatalf("the page forwards to no sign-in link:\n%s", b)
	}
	if _, err := os.Stat(page); err != nil {
		t.Fatalf("the page is gone before its link was used: %v", err)
	}
	if resp, _ := do(t, browser(t), "GET", m[1], nil, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the page's link: status %d, want 303 into the console", resp.StatusCode)
	}
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Errorf("the page outlived its link's use: %v", err)
	}
}
