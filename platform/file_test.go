package platform_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/platform"
)

// plant makes a folder holding one of each kind of file under a short path
// (a unix socket's path is limited to about 100 bytes) and returns it.
func plant(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("file", "regular contents")
	write("target", "the link's target")
	for _, err := range []error{
		os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link")),
		os.Symlink(dir, filepath.Join(dir, "dirlink")),
		os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")),
		syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600),
		os.Mkdir(filepath.Join(dir, "dir"), 0o700),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return dir
}

func TestOpenRegular(t *testing.T) {
	dir := plant(t)
	tests := []struct {
		name, path string
		kind       string // "" when the file opens
		missing    bool
	}{
		{"Regular", filepath.Join(dir, "file"), "", false},
		{"Missing", filepath.Join(dir, "absent"), "", true},
		{"Symlink", filepath.Join(dir, "link"), "symlink", false},
		{"SymlinkToFolder", filepath.Join(dir, "dirlink"), "symlink", false},
		{"DanglingSymlink", filepath.Join(dir, "dangling"), "symlink", false},
		{"FIFO", filepath.Join(dir, "fifo"), "fifo", false},
		{"Socket", filepath.Join(dir, "sock"), "socket", false},
		{"Directory", filepath.Join(dir, "dir"), "directory", false},
		{"Device", os.DevNull, "device", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := platform.OpenRegular(tt.path)
			var nr *platform.NotRegularError
			switch {
			case tt.missing:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("OpenRegular = %v, want an error wrapping fs.ErrNotExist", err)
				}
			case tt.kind == "":
				if err != nil {
					t.Fatalf("OpenRegular = %v, want the file", err)
				}
				f.Close()
			case !errors.As(err, &nr):
				if f != nil {
					f.Close()
				}
				t.Fatalf("OpenRegular = %v, want a *NotRegularError", err)
			case nr.Kind != tt.kind || nr.Path != tt.path:
				t.Errorf("NotRegularError = %+v, want kind %q at %s", nr, tt.kind, tt.path)
			}
		})
	}
	// Nothing was left open on the FIFO: a writer that will not wait finds
	// no reader.
	w, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		w.Close()
		t.Error("the FIFO has a reader after OpenRegular")
	} else if !errors.Is(err, syscall.ENXIO) {
		t.Errorf("open the FIFO for writing: %v, want ENXIO (no reader)", err)
	}
}

func TestReadRegular(t *testing.T) {
	dir := plant(t)
	tests := []struct {
		name, path string
		limit      int64
		want       string
		kind       string
	}{
		{"Whole", filepath.Join(dir, "file"), 100, "regular contents", ""},
		{"Limited", filepath.Join(dir, "file"), 7, "regular", ""},
		{"SymlinkNotFollowed", filepath.Join(dir, "link"), 100, "", "symlink"},
		{"FIFONeverWaitedOn", filepath.Join(dir, "fifo"), 100, "", "fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := platform.ReadRegular(tt.path, tt.limit)
			var nr *platform.NotRegularError
			switch {
			case tt.kind != "" && (!errors.As(err, &nr) || nr.Kind != tt.kind):
				t.Fatalf("ReadRegular = %q, %v; want a NotRegularError of kind %s", b, err, tt.kind)
			case tt.kind != "" && b != nil:
				t.Errorf("ReadRegular returned %q with its error", b)
			case tt.kind == "" && (err != nil || string(b) != tt.want):
				t.Errorf("ReadRegular = %q, %v; want %q", b, err, tt.want)
			}
		})
	}
}

func TestCheckReplaceable(t *testing.T) {
	dir := plant(t)
	tests := []struct{ name, kind string }{
		{"file", ""}, {"absent", ""},
		{"link", "symlink"}, {"dangling", "symlink"}, {"fifo", "fifo"}, {"sock", "socket"}, {"dir", "directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := platform.CheckReplaceable(filepath.Join(dir, tt.name))
			var nr *platform.NotRegularError
			switch {
			case tt.kind == "" && err != nil:
				t.Errorf("CheckReplaceable = %v, want nil", err)
			case tt.kind != "" && (!errors.As(err, &nr) || nr.Kind != tt.kind):
				t.Errorf("CheckReplaceable = %v, want a NotRegularError of kind %s", err, tt.kind)
			}
		})
	}
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		name string
		opts platform.WriteOptions
		want fs.FileMode
	}{
		{"Default", platform.WriteOptions{}, 0o600},
		{"Mode", platform.WriteOptions{Mode: 0o644}, 0o644},
		{"Volatile", platform.WriteOptions{Mode: 0o600, Durability: platform.Volatile}, 0o600},
		{"ReadOnly", platform.WriteOptions{Mode: 0o400}, 0o400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			// Longer, then shorter: the file holds exactly the last write.
			for _, content := range []string{"first\n", "second, longer\n", "3\n"} {
				if err := platform.WriteFileAtomic(p, []byte(content), tt.opts); err != nil {
					t.Fatal(err)
				}
				if got, err := os.ReadFile(p); err != nil || string(got) != content {
					t.Errorf("content = %q, %v; want %q", got, err, content)
				}
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if perm := fi.Mode().Perm(); perm != tt.want {
					t.Errorf("mode = %04o, want %04o", perm, tt.want)
				}
				if names := entries(t, dir); len(names) != 1 || names[0] != "state.json" {
					t.Errorf("folder holds %v, want only state.json", names)
				}
			}
		})
	}
	t.Run("ErrMissingFolder", func(t *testing.T) {
		dir := t.TempDir()
		if err := platform.WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), platform.WriteOptions{}); err == nil {
			t.Error("WriteFileAtomic into a missing folder = nil, want an error")
		}
		if names := entries(t, dir); len(names) != 0 {
			t.Errorf("a refused write left %v", names)
		}
	})
}

// TestWriteFileAtomicLeavesWhatIsNotAFile: a write never replaces a
// symlink, FIFO, socket or folder planted under the name; it leaves it, and
// a link's target, as they were, and leaves no temporary file.
func TestWriteFileAtomicLeavesWhatIsNotAFile(t *testing.T) {
	dir := plant(t)
	before := entries(t, dir)
	tests := []struct{ name, kind string }{
		{"link", "symlink"}, {"dangling", "symlink"}, {"dirlink", "symlink"},
		{"fifo", "fifo"}, {"sock", "socket"}, {"dir", "directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			err := platform.WriteFileAtomic(p, []byte("new"), platform.WriteOptions{})
			var nr *platform.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != tt.kind {
				t.Fatalf("WriteFileAtomic = %v, want a NotRegularError of kind %s", err, tt.kind)
			}
			if fi, err := os.Lstat(p); err != nil || platform.KindOf(fi.Mode()) != tt.kind {
				t.Errorf("after the write %s holds %v (%v), want the %s left", p, fi, err, tt.kind)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(dir, "target")); err != nil || string(b) != "the link's target" {
		t.Errorf("the link's target: %q, %v", b, err)
	}
	if after := entries(t, dir); !slices.Equal(after, before) {
		t.Errorf("folder holds %v, want %v", after, before)
	}
}

// TestWriteFileAtomicNoReplace: NoReplace creates the file when nothing is
// there, and otherwise fails with fs.ErrExist and changes nothing, whatever
// is there: it never replaces, so a link is no more replaced than a file.
func TestWriteFileAtomicNoReplace(t *testing.T) {
	dir := plant(t)
	opts := platform.WriteOptions{Mode: 0o600, NoReplace: true}
	t.Run("OK", func(t *testing.T) {
		p := filepath.Join(dir, "absent")
		if err := platform.WriteFileAtomic(p, []byte("created"), opts); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != "created" {
			t.Errorf("content = %q, %v; want created", got, err)
		}
	})
	before := entries(t, dir)
	for _, name := range []string{"file", "link", "dangling", "fifo", "dir"} {
		t.Run("ErrExist/"+name, func(t *testing.T) {
			if err := platform.WriteFileAtomic(filepath.Join(dir, name), []byte("new"), opts); !errors.Is(err, fs.ErrExist) {
				t.Errorf("WriteFileAtomic = %v, want fs.ErrExist", err)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(b) != "regular contents" {
		t.Errorf("the file: %q, %v; want it unchanged", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	if after := entries(t, dir); !slices.Equal(after, before) {
		t.Errorf("folder holds %v, want %v", after, before)
	}
}

func TestSyncDir(t *testing.T) {
	dir := plant(t)
	if err := platform.SyncDir(dir); err != nil {
		t.Errorf("SyncDir(folder) = %v", err)
	}
	// A FIFO in the folder's place is refused, not waited on for a writer.
	for _, name := range []string{"fifo", "file", "absent"} {
		if err := platform.SyncDir(filepath.Join(dir, name)); err == nil {
			t.Errorf("SyncDir(%s) = nil, want an error", name)
		}
	}
}

func TestWriteFileAtomicCheck(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "owner.json")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	errChanged := errors.New("changed on disk")
	t.Run("ErrRefused", func(t *testing.T) {
		var sawNew bool
		check := func() error {
			// The new bytes are on disk beside path, not yet in its place.
			got, _ := os.ReadFile(p)
			sawNew = len(entries(t, dir)) == 2 && string(got) == "old"
			return errChanged
		}
		if err := platform.WriteFileAtomic(p, []byte("new"), platform.WriteOptions{Check: check}); !errors.Is(err, errChanged) {
			t.Fatalf("WriteFileAtomic = %v, want the check's error", err)
		}
		if !sawNew {
			t.Error("the check did not run between the temporary file and the rename")
		}
		if got, _ := os.ReadFile(p); string(got) != "old" {
			t.Errorf("file = %q after a refused check, want old", got)
		}
		if got := entries(t, dir); len(got) != 1 {
			t.Errorf("folder holds %v, want only the file (no temporary left)", got)
		}
	})
	t.Run("OK", func(t *testing.T) {
		if err := platform.WriteFileAtomic(p, []byte("new"), platform.WriteOptions{Check: func() error { return nil }}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != "new" {
			t.Errorf("file = %q, want new", got)
		}
	})
}

func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "inbox.md"), filepath.Join(dir, "active.md")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(src, "stamped")
	write(dst, "the owner's copy")
	t.Run("ErrExist", func(t *testing.T) {
		if err := platform.RenameNoReplace(src, dst); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("RenameNoReplace over a file = %v, want fs.ErrExist", err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "the owner's copy" {
			t.Errorf("destination = %q, want it untouched", b)
		}
		if b, _ := os.ReadFile(src); string(b) != "stamped" {
			t.Errorf("source = %q, want it still in place", b)
		}
	})
	t.Run("OK", func(t *testing.T) {
		if err := os.Remove(dst); err != nil {
			t.Fatal(err)
		}
		if err := platform.RenameNoReplace(src, dst); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "stamped" {
			t.Errorf("destination = %q, want the moved file", b)
		}
		if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("source still there: %v", err)
		}
	})
}
