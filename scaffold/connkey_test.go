package scaffold_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/scaffold"
)

// TestReadConnectionKey checks the key a client presents: trimmed, and a
// missing or empty file said so with the owner's next step.
func TestReadConnectionKey(t *testing.T) {
	for _, tt := range []struct {
		name    string
		file    *string // nil: no file
		want    string
		wantErr string
	}{
		{name: "Trimmed", file: ptr("  plx_live_abc\n"), want: "plx_live_abc"},
		{name: "Missing", wantErr: "is Plexus initialised there?"},
		{name: "Empty", file: ptr(" \n"), wantErr: "is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.file != nil {
				if err := os.WriteFile(filepath.Join(home, scaffold.FileConnectionKey), []byte(*tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := scaffold.ReadConnectionKey(home)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("ReadConnectionKey = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
