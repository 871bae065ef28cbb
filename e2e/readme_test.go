package e2e

// The README's quick start, run as it stands on a fresh machine: an empty
// HOME, the built binary as bin/plexus, `plexus serve` as `make run` starts
// it, and each command of the quick-start block in turn.

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// quickStartMarker is the README comment naming the block this test runs.
const quickStartMarker = "<!-- e2e/readme_test.go runs the next block"

// quickStart returns the logical command lines of the README block after
// quickStartMarker: continuation lines joined, blank and comment-only lines
// dropped.
func quickStart(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), quickStartMarker)
	if !ok {
		t.Fatalf("README.md has lost its marker %q", quickStartMarker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("no ```sh block after the quick-start marker")
	}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if more, cont := strings.CutSuffix(strings.TrimRight(line, " "), `\`); cont {
			cur.WriteString(more)
			continue
		}
		cur.WriteString(line)
		if l := strings.TrimSpace(cur.String()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
		cur.Reset()
	}
	return lines
}

// The placeholders of the quick start, and what stands for each: what an
// earlier command printed, as the reader would copy it.
var (
	enrollCodeRe = regexp.MustCompile(`plx_enroll_[A-Za-z0-9_-]+`)
	pendIDRe     = regexp.MustCompile(`pend_[0-9A-HJKMNP-TV-Z]{26}`)
	traceIDRe    = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	exitsRe      = regexp.MustCompile(`# .*\bexits (\d)\b`)
)

func TestREADMEQuickStart(t *testing.T) {
	lines := quickStart(t)
	if len(lines) < 10 {
		t.Fatalf("the quick start has %d commands: %q", len(lines), lines)
	}
	home := t.TempDir() // an empty HOME: a fresh machine
	work := t.TempDir() // the checkout: bin/plexus, as `make run` builds it
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(plexusBin(t), filepath.Join(work, "bin", "plexus")); err != nil {
		t.Fatal(err)
	}
	// PLEXUS_ADDR moves the bind off 7077, which another test run may hold;
	// the README names it as the way to do so. Nothing else of the test's
	// environment is passed on (no PLEXUS_HOME, no PLEXUS_AGENT_HOME).
	addr := freeLoopbackAddr(t)
	env := append([]string{"HOME=" + home, "PWD=" + work, "PATH=" + os.Getenv("PATH"), "PLEXUS_ADDR=" + addr}, deciderEnv()...)
	startQuickStartDaemon(t, work, env, addr)

	var exports []string // export lines run before each later command
	var printed strings.Builder
	for _, line := range lines {
		if strings.HasPrefix(line, "export ") {
			exports = append(exports, line)
			continue
		}
		command := fillPlaceholders(t, line, printed.String())
		want := 0
		if m := exitsRe.FindStringSubmatch(line); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		out, code := runShell(t, work, env, strings.Join(append(exports, command), "\n"))
		printed.WriteString(out)
		if code != want {
			t.Fatalf("%s\nexit %d, want %d; output:\n%s", command, code, want, out)
		}
		t.Logf("$ %s\n%s", command, out)
		switch {
		case strings.HasPrefix(command, "mv ") && strings.Contains(command, "/active/"):
			waitJournalRow(t, work, env, "grant.approved")
		case strings.HasPrefix(command, "rm ") && strings.Contains(command, "/active/"):
			waitJournalRow(t, work, env, "grant.revoked")
		}
	}
	if !strings.Contains(printed.String(), "ok: ") {
		t.Errorf("journal verify did not report the chain intact:\n%s", printed.String())
	}
}

// fillPlaceholders replaces the quick start's placeholders in line with
// what the commands before it printed (the latest of each).
func fillPlaceholders(t *testing.T, line, printed string) string {
	t.Helper()
	last := func(re *regexp.Regexp, what string) string {
		all := re.FindAllString(printed, -1)
		if len(all) == 0 {
			t.Fatalf("%s: no %s printed before it", line, what)
		}
		return all[len(all)-1]
	}
	if strings.Contains(line, "plx_enroll_…") {
		line = strings.ReplaceAll(line, "plx_enroll_…", last(enrollCodeRe, "enrollment code"))
	}
	if strings.Contains(line, "pend_…") {
		line = strings.ReplaceAll(line, "pend_…", last(pendIDRe, "pending id"))
	}
	if strings.Contains(line, "<trace-id>") {
		// Its first characters, as the comment says will do.
		line = strings.ReplaceAll(line, "<trace-id>", last(traceIDRe, "trace id")[:16])
	}
	if strings.Contains(line, "…") {
		t.Fatalf("%s: a placeholder this test does not know", line)
	}
	return line
}

// runShell runs script with sh in dir and returns its combined output and
// exit status.
func runShell(t *testing.T, dir string, env []string, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// waitJournalRow waits until the journal holds a row of type typ: the
// daemon applies a moved or deleted decision file when its watcher sees it,
// a moment after the command returned.
func waitJournalRow(t *testing.T, dir string, env []string, typ string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := runShell(t, dir, env, "bin/plexus journal --json --type "+typ)
		if code == 0 && strings.Contains(out, `"action_type":"`+typ+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s row in the journal after 30s:\n%s", typ, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startQuickStartDaemon runs `plexus serve` from work with env, as `make
// run` does, and waits until it answers on addr.
func startQuickStartDaemon(t *testing.T, work string, env []string, addr string) {
	t.Helper()
	p := &plexusProc{addr: addr, out: &syncBuffer{}, done: make(chan struct{}), hc: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}}
	p.cmd = exec.Command(filepath.Join(work, "bin", "plexus"), "serve")
	p.cmd.Dir, p.cmd.Env = work, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	if err := p.waitReady(); err != nil {
		p.kill(t)
		t.Fatalf("plexus serve did not come up: %v\noutput:\n%s", err, p.out.String())
	}
}
