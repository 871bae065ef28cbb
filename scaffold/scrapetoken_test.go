package scaffold_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/scaffold"
)

const goodScrapeToken = "0123456789abcdef0123456789abcdef"

func TestReadScrapeToken(t *testing.T) {
	tests := []struct {
		name    string
		write   func(t *testing.T, path string)
		want    string
		wantErr string // in the error and the problem Load reports
	}{
		{"Absent", func(*testing.T, string) {}, "", ""},
		{"Good", writeMode(goodScrapeToken+"\n", 0o600), goodScrapeToken, ""},
		{"GroupReadable", writeMode(goodScrapeToken, 0o640), "", "mode 0640 (group or others can read it)"},
		{"WorldReadable", writeMode(goodScrapeToken, 0o644), "", "chmod 600"},
		{"Short", writeMode("short", 0o600), "", "does not hold a scrape token"},
		{"Credential", writeMode("plx_live_"+goodScrapeToken, 0o600), "", "does not hold a scrape token"},
		{"TwoWords", writeMode(goodScrapeToken+" "+goodScrapeToken, 0o600), "", "does not hold a scrape token"},
		{"Huge", writeMode(strings.Repeat("a", 5000), 0o600), "", "does not hold a scrape token"},
		{"Symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, []byte(goodScrapeToken), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "", "cannot be read"},
		{"Directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "", "cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := mustInit(t)
			tt.write(t, filepath.Join(home, scaffold.FileScrapeToken))
			got, err := scaffold.ReadScrapeToken(home)
			_, loadErr := scaffold.Load(home)
			if tt.wantErr == "" {
				if err != nil || got != tt.want || loadErr != nil {
					t.Fatalf("ReadScrapeToken = %q, %v; Load: %v; want %q", got, err, loadErr, tt.want)
				}
				return
			}
			var se *scaffold.ScrapeTokenError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.wantErr) || got != "" {
				t.Fatalf("ReadScrapeToken = %q, %v; want a *ScrapeTokenError saying %q", got, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), goodScrapeToken) {
				t.Errorf("the error shows the token: %v", err)
			}
			if loadErr == nil || !strings.Contains(loadErr.Error(), tt.wantErr) {
				t.Errorf("Load = %v, want a problem saying %q", loadErr, tt.wantErr)
			}
		})
	}
}

// The home's .gitignore leaves the scrape token out of a repository.
func TestGitignoreScrapeToken(t *testing.T) {
	home := mustInit(t)
	b, err := os.ReadFile(filepath.Join(home, scaffold.FileGitignore))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\n"+string(b), "\n"+scaffold.FileScrapeToken+"\n") {
		t.Errorf(".gitignore does not ignore %s:\n%s", scaffold.FileScrapeToken, b)
	}
}

func writeMode(content string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
}
