package inbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

func TestIDFromName(t *testing.T) {
	for _, tt := range []struct {
		name string
		id   string
		ok   bool
	}{
		{pendID + ".md", pendID, true},
		{"/home/o/.plexus/inbox/" + pendID + ".md", pendID, true},
		{pendID, "", false},
		{pendID + ".md~", "", false},
		{pendID + ".MD", "", false},
		{strings.ToLower(pendID) + ".md", "", false},
		{"pend_01JDX3K9Q8M2V7T4R6W5Y0Z1A.md", "", false},   // 25 characters
		{"pend_01JDX3K9Q8M2V7T4R6W5Y0Z1ABC.md", "", false}, // 27
		{"pend_81JDX3K9Q8M2V7T4R6W5Y0Z1AB.md", "", false},  // overflows 48 bits of time
		{"pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AU.md", "", false},  // U is not Crockford
		{"grant_01JDX3K9Q8M2V7T4R6W5Y0Z1AB.md", "", false},
		{"notes.md", "", false},
		{".md", "", false},
	} {
		id, ok := IDFromName(tt.name)
		if id != tt.id || ok != tt.ok {
			t.Errorf("IDFromName(%q) = %q, %v; want %q, %v", tt.name, id, ok, tt.id, tt.ok)
		}
	}
	if got := FileName(pendID); got != pendID+".md" {
		t.Errorf("FileName = %q", got)
	}
}

func TestSum(t *testing.T) {
	if got, want := Sum([]byte("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Sum(abc) = %s, want %s", got, want)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	name := FileName(pendID)
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteAtomic(dir, name, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Errorf("content = %q, want %q", got, content)
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("mode = %o, want 600", perm)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != name {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("dir holds %v, want only %s", names, name)
		}
	}
}

func TestWriteAtomicRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "../x.md", "a/b.md"} {
		if err := WriteAtomic(dir, name, []byte("x")); err == nil {
			t.Errorf("WriteAtomic(%q) = nil, want an error", name)
		}
	}
	if err := WriteAtomic(filepath.Join(dir, "missing"), "x.md", []byte("x")); err == nil {
		t.Error("WriteAtomic into a missing folder = nil, want an error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused writes left %d entries", len(entries))
	}
}

func TestWindow(t *testing.T) {
	custom := func(d time.Duration) plexus.TrustWindow {
		return plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: d.Milliseconds()}
	}
	for _, tt := range []struct {
		in   string
		want plexus.TrustWindow
		text string // FormatWindow(want); "" means in
		ok   bool
	}{
		{"once", once, "", true},
		{"1h", w1h, "", true},
		{"1d", w1d, "", true},
		{"7d", w7d, "", true},
		{"until-revoked", plexus.TrustWindow{Kind: plexus.WindowUntilRevoked}, "", true},
		{"36h", w36h, "1d12h", true},
		{"1d12h", w36h, "", true},
		{"3d", custom(72 * time.Hour), "", true},
		{"90m", custom(90 * time.Minute), "1h30m", true},
		{"24h", w1d, "1d", true},
		{"60m", w1h, "1h", true},
		{"168h", w7d, "7d", true},
		{"1m30s", custom(90 * time.Second), "", true},
		{" Once ", once, "once", true},
		{"0s", plexus.TrustWindow{}, "", false},
		{"0d", plexus.TrustWindow{}, "", false},
		{"-1h", plexus.TrustWindow{}, "", false},
		{"1d-1h", plexus.TrustWindow{}, "", false},
		{"d", plexus.TrustWindow{}, "", false},
		{"1.5d", plexus.TrustWindow{}, "", false},
		{"1µs", plexus.TrustWindow{}, "", false},
		{"99999999d", plexus.TrustWindow{}, "", false},
		{"forever", plexus.TrustWindow{}, "", false},
		{"", plexus.TrustWindow{}, "", false},
	} {
		got, err := ParseWindow(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseWindow(%q) = %+v, %v; want ok %v", tt.in, got, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseWindow(%q) (-want +got):\n%s", tt.in, diff)
		}
		text := tt.text
		if text == "" {
			text = tt.in
		}
		if s, err := FormatWindow(got); err != nil || s != text {
			t.Errorf("FormatWindow(%+v) = %q, %v; want %q", got, s, err, text)
		}
	}
	if _, err := FormatWindow(plexus.TrustWindow{Kind: plexus.WindowCustom}); err == nil {
		t.Error("FormatWindow(custom without ms) = nil error")
	}
}
