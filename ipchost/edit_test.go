package ipchost_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/ipchost"
)

// TestDeclareRemove checks the owner's edits of providers.json from the
// command line: what is refused leaves the file as it was.
func TestDeclareRemove(t *testing.T) {
	const before = `{"providers": {"notes": {"command": "/bin/cat"}}}`
	cfg := plexus.ProviderConfig{Command: "/bin/echo", Restart: plexus.RestartOnFailure}
	for _, tt := range []struct {
		name         string
		edit         func(path string) (bool, error)
		wantErr      string
		wantReplaced bool
		want, gone   string
	}{
		{name: "Declare", edit: func(p string) (bool, error) { return ipchost.Declare(p, "echo", cfg, false) }, want: `"echo"`},
		{name: "Taken", edit: func(p string) (bool, error) { return ipchost.Declare(p, "notes", cfg, false) }, wantErr: "already declared"},
		{name: "Replace", edit: func(p string) (bool, error) { return ipchost.Declare(p, "notes", cfg, true) },
			wantReplaced: true, want: "/bin/echo", gone: "/bin/cat"},
		{name: "Invalid", edit: func(p string) (bool, error) {
			return ipchost.Declare(p, "echo", plexus.ProviderConfig{Command: "/bin/echo", Restart: "sometimes"}, false)
		}, wantErr: "nothing was written"},
		{name: "Remove", edit: func(p string) (bool, error) { return false, ipchost.Remove(p, "notes") }, gone: `"notes"`},
		{name: "RemoveUnknown", edit: func(p string) (bool, error) { return false, ipchost.Remove(p, "nope") }, wantErr: `no provider "nope"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "providers.json")
			if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
				t.Fatal(err)
			}
			replaced, err := tt.edit(path)
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			var ee *ipchost.EditError
			switch {
			case tt.wantErr != "":
				if !errors.As(err, &ee) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an *EditError saying %q", err, tt.wantErr)
				}
				if string(b) != before {
					t.Errorf("a refused edit wrote %s", b)
				}
			case err != nil:
				t.Fatal(err)
			}
			if replaced != tt.wantReplaced {
				t.Errorf("replaced = %v, want %v", replaced, tt.wantReplaced)
			}
			if !strings.Contains(string(b), tt.want) || (tt.gone != "" && strings.Contains(string(b), tt.gone)) {
				t.Errorf("providers.json = %s, want %q in it and %q gone", b, tt.want, tt.gone)
			}
		})
	}
}

// TestWriteWait checks the report after a provider was declared: its tools
// once up, a *DownError once it exited.
func TestWriteWait(t *testing.T) {
	var w bytes.Buffer
	up := plexus.ProviderStatus{ID: "p", PID: 7, Tools: []string{"p.echo"}}
	if err := ipchost.WriteWait(&w, "p", up, true); err != nil || !strings.Contains(w.String(), "  p.echo") {
		t.Errorf("up: %v, wrote %q", err, w.String())
	}
	var de *ipchost.DownError
	err := ipchost.WriteWait(&w, "p", plexus.ProviderStatus{State: plexus.ProviderExited, LastExit: "exit 2"}, false)
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "exit 2") {
		t.Errorf("exited: err = %v, want a *DownError", err)
	}
}
