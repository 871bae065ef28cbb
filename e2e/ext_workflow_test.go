package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// gateToolArg, as the first argument, makes the test binary act as a cli
// tool that blocks: it writes <gate>.started, then waits until <gate>
// exists and prints {"passed": "<gate>"}. An argument, not a variable: a
// child gets only the base environment and what its route declares.
const gateToolArg = "--xtest-gate-tool"

func init() {
	if len(os.Args) != 3 || os.Args[1] != gateToolArg {
		return
	}
	gate := os.Args[2]
	if err := os.WriteFile(gate+".started", nil, 0o600); err != nil {
		os.Exit(3)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(gate); err == nil {
			fmt.Printf("{\"passed\": %q}\n", gate)
			os.Exit(0)
		}
	}
	os.Exit(4)
}

// TestExtensionWorkflowRevokedBetweenMembers: through the real pipeline, a
// token revoked while a workflow's first member runs stops the workflow
// before its second: the first member's call is audited and not undone,
// the second is refused token_revoked, and the workflow fails saying so.
func TestExtensionWorkflowRevokedBetweenMembers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	pathSchema := json.RawMessage(`{"type":"object","properties":{"gate":{"type":"string"}},"required":["gate"]}`)
	m := plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "gated", Label: "Gated steps", Transport: plexus.TransportCLI,
		Capabilities: []plexus.ExtensionCapabilityDecl{
			{Name: "step.first", Kind: plexus.KindCapability, Label: "First", Describe: "Waits for the gate.", Grants: []plexus.Verb{plexus.VerbRead},
				IO: &plexus.IOSchema{Input: pathSchema}, Route: json.RawMessage(fmt.Sprintf(`{"bin": %q, "args": [%q, "{gate}"]}`, exe, gateToolArg))},
			{Name: "step.second", Kind: plexus.KindCapability, Label: "Second", Describe: "Waits for the gate too.", Grants: []plexus.Verb{plexus.VerbRead},
				IO: &plexus.IOSchema{Input: pathSchema}, Route: json.RawMessage(fmt.Sprintf(`{"bin": %q, "args": [%q, "{gate}"]}`, exe, gateToolArg))},
			{Name: "steps.both", Kind: plexus.KindWorkflow, Label: "Both", Describe: "First, then second.", Grants: []plexus.Verb{plexus.VerbRead},
				Transport: plexus.TransportWorkflow, Members: []plexus.WorkflowMember{
					{ID: "gated.step.first", Verbs: []plexus.Verb{plexus.VerbRead}}, {ID: "gated.step.second", Verbs: []plexus.Verb{plexus.VerbRead}}}},
		}}
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	e.ok("ext", "add", writeManifest(t, m))
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	var tok plexus.ScopedToken
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"gated.steps.both": "allow"}}, &tok); st != http.StatusOK {
		t.Fatalf("grant: status %d, %+v", st, tok)
	}

	type result struct {
		status int
		resp   plexus.InvokeResponse
	}
	done := make(chan result, 1)
	go func() {
		st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "gated.steps.both", Input: map[string]any{"gate": gate}})
		done <- result{st, resp}
	}()
	waitFor(t, 10*time.Second, "the first member to start", holds(func() bool { _, err := os.Stat(gate + ".started"); return err == nil }))
	if st := td.call(t, "POST", "/grants/revoke", td.admin(), plexus.RevokeRequest{JTI: tok.JTI, Reason: "changed my mind"}, nil); st != http.StatusOK {
		t.Fatalf("revoke: status %d", st)
	}
	eventWhere(t, events, plexus.EventTokenRevoked, func(r plexus.TokenRevokedEvent) bool { return r.JTI == tok.JTI })
	if err := os.WriteFile(gate, nil, 0o600); err != nil { // the first member may finish now
		t.Fatal(err)
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the workflow call did not return")
	}
	if r.resp.OK || r.resp.Error == nil || r.resp.Error.Code != plexus.CodeTransportError {
		t.Fatalf("workflow: status %d, %+v", r.status, r.resp.Error)
	}
	detail, _ := json.Marshal(r.resp.Error.Detail)
	var d struct {
		Completed  []struct{ ID string } `json:"completed"`
		Failed     string                `json:"failed"`
		FailedCode string                `json:"failedCode"`
	}
	if err := json.Unmarshal(detail, &d); err != nil || len(d.Completed) != 1 || d.Completed[0].ID != "gated.step.first" ||
		d.Failed != "gated.step.second" || d.FailedCode != string(plexus.CodeTokenRevoked) {
		t.Errorf("detail = %s (%v)", detail, err)
	}
	var got []string
	for _, a := range td.activity(t, journal.Filter{}) {
		if (a.ActionType == "invoke.ok" || a.ActionType == "invoke.denied" || a.ActionType == "invoke.failed") && a.Target != "" {
			got = append(got, a.ActionType+" "+a.Target)
		}
	}
	want := []string{"invoke.ok gated.step.first", "invoke.denied gated.step.second", "invoke.failed gated.steps.both"}
	if !slices.Equal(got, want) {
		t.Errorf("invoke rows = %v, want %v", got, want)
	}
}
