package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/client"
)

// TestMCPServeCredentialRefused: mcp serve reads only a credential that is
// the owner's alone, from a single path element under clients/.
func TestMCPServeCredentialRefused(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, client.HostsDir, "loose")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, client.CredentialsFile), []byte(`{"agentId":"loose","pat":"plx_agent_x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"Traversal":    {[]string{"--agent", "../../etc"}, "is not an agent id"},
		"LooseFile":    {[]string{"--agent", "loose"}, "it must be 0600"},
		"NoCredential": {[]string{"--agent", "nobody"}, "no agent credential"},
		"NoAgent":      {nil, "usage: plexus mcp serve --agent"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			argv := append([]string{"plexus", "--home", home, "mcp", "serve"}, tc.args...)
			if code := runIn(context.Background(), process{decider: deciderIdentity, stdin: strings.NewReader("")}, argv, &out, &errOut); code == 0 ||
				!strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, errOut.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q: nothing may reach the host's channel", out.String())
			}
		})
	}
}
