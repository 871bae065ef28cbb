package inbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

const moveID = IDPrefix + "01HZX3Q4W5E6R7T8Y9V0W1X2Y3"

func moveHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		if err := os.Mkdir(filepath.Join(home, f), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func putFile(t *testing.T, home, folder, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, folder, FileName(moveID)), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLocate checks the folders' order, that nothing found is no error,
// and that a symlink under the decision's name is reported with its folder,
// never followed.
func TestLocate(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, home string)
		wantFolder string
		wantBody   string
		notRegular bool
	}{
		{name: "none", setup: func(*testing.T, string) {}},
		{name: "inbox first", setup: func(t *testing.T, home string) {
			putFile(t, home, plexus.FolderActive, "active")
			putFile(t, home, plexus.FolderInbox, "inbox")
		}, wantFolder: plexus.FolderInbox, wantBody: "inbox"},
		{name: "archive", setup: func(t *testing.T, home string) {
			putFile(t, home, plexus.FolderArchive, "archived")
		}, wantFolder: plexus.FolderArchive, wantBody: "archived"},
		{name: "symlink", setup: func(t *testing.T, home string) {
			target := filepath.Join(home, "elsewhere")
			if err := os.WriteFile(target, []byte("not yours"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(home, plexus.FolderRejected, FileName(moveID))); err != nil {
				t.Fatal(err)
			}
		}, wantFolder: plexus.FolderRejected, notRegular: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := moveHome(t)
			tt.setup(t, home)
			folder, b, err := Locate(home, moveID)
			var nr *platform.NotRegularError
			if tt.notRegular != errors.As(err, &nr) || (!tt.notRegular && err != nil) {
				t.Fatalf("Locate: err = %v, want not-regular %v", err, tt.notRegular)
			}
			if folder != tt.wantFolder || string(b) != tt.wantBody {
				t.Errorf("Locate = %q, %q; want %q, %q", folder, b, tt.wantFolder, tt.wantBody)
			}
		})
	}
}

// TestMove checks that the stamped bytes land in the destination and that
// a file already there is never replaced.
func TestMove(t *testing.T) {
	tests := []struct {
		name       string
		inDest     bool
		wantExists bool
	}{
		{name: "moves", inDest: false},
		{name: "keeps the copy in the destination", inDest: true, wantExists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := moveHome(t)
			putFile(t, home, plexus.FolderInbox, "original")
			if tt.inDest {
				putFile(t, home, plexus.FolderActive, "theirs")
			}
			err := Move(home, moveID, plexus.FolderActive, []byte("stamped"))
			var ee *ExistsError
			if tt.wantExists != errors.As(err, &ee) || (!tt.wantExists && err != nil) {
				t.Fatalf("Move: err = %v, want exists %v", err, tt.wantExists)
			}
			wantDest, wantInbox := "stamped", ""
			if tt.wantExists {
				wantDest, wantInbox = "theirs", "original"
			}
			if got := readOr(t, filepath.Join(home, plexus.FolderActive, FileName(moveID))); got != wantDest {
				t.Errorf("active/ holds %q, want %q", got, wantDest)
			}
			if got := readOr(t, filepath.Join(home, plexus.FolderInbox, FileName(moveID))); got != wantInbox {
				t.Errorf("inbox/ holds %q, want %q", got, wantInbox)
			}
		})
	}
}

// readOr is the file at path, "" when there is none.
func readOr(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
