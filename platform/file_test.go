package platform_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
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
