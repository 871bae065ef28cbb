// Package service runs `plexus serve` under the owner's service manager: a
// systemd user unit on Linux, a launchd agent on macOS. It renders the unit
// from an embedded template, installs, inspects and removes that one file,
// and names the command that starts or stops it.
//
// It never starts, stops or reloads anything itself (the owner runs the one
// command it prints), and never replaces or removes a unit file that differs
// from the one it would write — an owner's edit — unless told to (Force).
package service

import (
	"bytes"
	"embed"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
	"github.com/plexus-gw/plexus/platform"
)

// Kind is a service manager.
type Kind string

const (
	Systemd Kind = "systemd"
	Launchd Kind = "launchd"
)

// Names of the unit in each manager.
const (
	SystemdUnit  = "plexus.service"
	LaunchdLabel = "com.github.plexus-gw.plexus"
)

//go:embed plexus.service.tmpl launchd.plist.tmpl
var templates embed.FS

// Spec is what the unit runs: Binary (absolute) with --home Home and, when
// Addr is set, --addr Addr, then serve.
type Spec struct {
	Binary string
	Home   string
	Addr   string
}

// Unit is one rendered unit file and the commands that drive it.
type Unit struct {
	Kind    Kind
	Path    string
	Content []byte
	// Start is the one command that (re)loads and starts it; Stop the one
	// that stops it and keeps it from starting at login; Show the one that
	// says whether it runs.
	Start, Stop, Show string
}

// ForOS returns the manager of goos (runtime.GOOS), or an error naming the
// systems that have one here.
func ForOS(goos string) (Kind, error) {
	switch goos {
	case "linux":
		return Systemd, nil
	case "darwin":
		return Launchd, nil
	}
	return "", fmt.Errorf("plexus service supports Linux (systemd) and macOS (launchd), not %s: run plexus serve under your own supervisor", goos)
}

// Render builds kind's unit for spec, to live under userHome (the owner's
// home folder). Binary and Home must be absolute: a service manager starts
// the unit from no particular folder.
func Render(kind Kind, userHome string, spec Spec) (Unit, error) {
	for name, p := range map[string]string{"binary": spec.Binary, "home": spec.Home, "user home": userHome} {
		if !filepath.IsAbs(p) {
			return Unit{}, fmt.Errorf("render the service unit: the %s %q is not an absolute path", name, p)
		}
	}
	for name, v := range map[string]string{"binary": spec.Binary, "home": spec.Home, "address": spec.Addr} {
		if err := unitSafe(v); err != nil {
			return Unit{}, fmt.Errorf("render the service unit: the %s %q %w: move it or pass another", name, v, err)
		}
	}
	args := []string{spec.Binary, "--home", spec.Home}
	if spec.Addr != "" {
		args = append(args, "--addr", spec.Addr)
	}
	args = append(args, "serve")
	data := struct {
		Args       []string
		Label, Log string
	}{args, LaunchdLabel, filepath.Join(spec.Home, "serve.log")}
	u := Unit{Kind: kind}
	var name string
	switch kind {
	case Systemd:
		name = "plexus.service.tmpl"
		u.Path = filepath.Join(userHome, ".config", "systemd", "user", SystemdUnit)
		u.Start = "systemctl --user daemon-reload && systemctl --user enable --now " + SystemdUnit
		u.Stop = "systemctl --user disable --now " + SystemdUnit
		u.Show = "systemctl --user status " + SystemdUnit
	case Launchd:
		name = "launchd.plist.tmpl"
		u.Path = filepath.Join(userHome, "Library", "LaunchAgents", LaunchdLabel+".plist")
		u.Start = "launchctl bootstrap gui/$(id -u) " + shellQuote(u.Path)
		u.Stop = "launchctl bootout gui/$(id -u)/" + LaunchdLabel
		u.Show = "launchctl print gui/$(id -u)/" + LaunchdLabel
	default:
		return Unit{}, fmt.Errorf("render the service unit: unknown service manager %q", kind)
	}
	t, err := template.New(name).Funcs(template.FuncMap{"systemd": systemdQuote, "xml": xmlText}).ParseFS(templates, name)
	if err != nil {
		return Unit{}, fmt.Errorf("render the service unit: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return Unit{}, fmt.Errorf("render the service unit: %w", err)
	}
	u.Content = b.Bytes()
	return u, nil
}

// State is what is at a unit's path compared with the unit.
type State int

const (
	// Absent: no file.
	Absent State = iota
	// Same: the file is exactly what the unit would write.
	Same
	// Differs: the file is something else: the owner's edit, or a unit
	// written for another binary, home or address.
	Differs
)

// maxUnitFile bounds what Inspect reads of a unit file.
const maxUnitFile = 1 << 20

// Inspect reads what is at u.Path; for Differs, diff is a unified diff from
// the file to u.
func Inspect(u Unit) (st State, diff string, err error) {
	// Only a regular file is read (a FIFO or a link planted under the name
	// is an error, not a hang), up to a size no unit reaches.
	have, err := platform.ReadRegular(u.Path, maxUnitFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Absent, "", nil
	case err != nil:
		return Absent, "", fmt.Errorf("read %s: %w", u.Path, err)
	case bytes.Equal(have, u.Content):
		return Same, "", nil
	}
	return Differs, udiff.Unified(u.Path+" (now)", u.Path+" (plexus would write)", string(have), string(u.Content)), nil
}

// DiffersError refuses to replace or remove a unit file that is not the
// one plexus would write; Diff shows how.
type DiffersError struct {
	Path string
	Diff string
}

func (e *DiffersError) Error() string {
	return fmt.Sprintf("%s is not the unit plexus would write (edited?); leaving it as it is", e.Path)
}

// Install writes u, creating its folder (0700 when new). A file already
// there that differs is replaced only with force; otherwise the error is a
// *DiffersError. changed is false when the file was already u.
func Install(u Unit, force bool) (changed bool, err error) {
	st, diff, err := Inspect(u)
	switch {
	case err != nil:
		return false, err
	case st == Same:
		return false, nil
	case st == Differs && !force:
		return false, &DiffersError{Path: u.Path, Diff: diff}
	}
	if err := os.MkdirAll(filepath.Dir(u.Path), 0o700); err != nil {
		return false, fmt.Errorf("install %s: %w", u.Path, err)
	}
	if err := platform.WriteFileAtomic(u.Path, u.Content, platform.WriteOptions{Mode: 0o644}); err != nil {
		return false, fmt.Errorf("install %s: %w", u.Path, err)
	}
	return true, nil
}

// Uninstall removes u's file. One that differs from u is removed only with
// force; otherwise the error is a *DiffersError. removed is false when
// there was nothing to remove.
func Uninstall(u Unit, force bool) (removed bool, err error) {
	st, diff, err := Inspect(u)
	switch {
	case err != nil:
		return false, err
	case st == Absent:
		return false, nil
	case st == Differs && !force:
		return false, &DiffersError{Path: u.Path, Diff: diff}
	}
	if err := os.Remove(u.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("uninstall %s: %w", u.Path, err)
	}
	return true, nil
}

// systemdQuote makes s one argument of an ExecStart= line: double-quoted,
// with backslash and quote escaped, and the specifier '%' and the variable
// '$' doubled so systemd passes them through as written.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$", "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// unitSafe refuses what neither file format can carry as written: control
// characters (a \r or \n ends a systemd line, so a home could add its own
// ExecStart=), text that is not UTF-8, and the characters XML 1.0 forbids
// (xml.EscapeText would turn them into U+FFFD, so the plist would run
// another path).
func unitSafe(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return fmt.Errorf("holds the control or non-XML character %U", r)
		}
	}
	return nil
}

// xmlText escapes s for XML character data.
func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
