package cliexec_test

// Integration tests against real processes: the fake tool (tool_test.go)
// and a real system binary. Each test checks at its end that every
// goroutine a dispatch started has ended.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/cliexec"
)

// The secret the tests resolve; it must never come back.
const (
	secretName  = "api-token"
	secretValue = "s3cr3t-CANARY-7f9a2c"
	secretVar   = "PLEXUS_SECRET_API_TOKEN" // the default name for secretName
)

// bins resolves "faketool" to the test binary and "echo" to the system's,
// and starts children the platform's way.
type bins struct {
	*platform.Services
	paths map[string]string
	env   []string
}

func (b bins) Resolve(name string) (string, error) {
	if p, ok := b.paths[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

func (b bins) Env() []string { return b.env }

// secrets is a fixed secret store.
type secrets map[string]string

func (s secrets) Secret(name string) (string, error) {
	v, ok := s[name]
	if !ok {
		return "", fmt.Errorf("no secret named %q", name)
	}
	return v, nil
}

func testBins(tb testing.TB) bins {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	b := bins{
		Services: platform.New(platform.Options{Home: tb.TempDir()}),
		paths:    map[string]string{"faketool": self},
		// A stale value of the secret's variable, which the resolved one
		// must replace. Under -race, a child that exits 0 would otherwise
		// sleep a second in the race runtime's atexit.
		env: []string{toolEnv + "=1", "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0", secretVar + "=stale"},
	}
	if p, err := exec.LookPath("/bin/echo"); err == nil {
		b.paths["echo"] = p
	}
	return b
}

// newTransport returns a transport over the fake tool and checks, when the
// test ends, that no goroutine is left behind.
func newTransport(tb testing.TB, opts cliexec.Options) *cliexec.Transport {
	tb.Helper()
	checkGoroutines(tb)
	return cliexec.New(testBins(tb), secrets{secretName: secretValue}, opts)
}

func checkGoroutines(tb testing.TB) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				tb.Fatalf("goroutines: %d after, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// entry is a cli entry whose declaration route is decl, with the manifest's
// secret declarations beside it. Without any, the secret the route names is
// declared (plainly, as a valid manifest would).
func entry(tb testing.TB, decl map[string]any, declared ...plexus.ExtensionSecretRef) plexus.Entry {
	tb.Helper()
	if sec, ok := decl["secret"].(map[string]any); ok && len(declared) == 0 {
		if name, ok := sec["name"].(string); ok {
			declared = []plexus.ExtensionSecretRef{{Name: name}}
		}
	}
	d, err := json.Marshal(decl)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(plexus.ExtensionRoute{Decl: d, Secrets: declared})
	if err != nil {
		tb.Fatal(err)
	}
	return plexus.Entry{ID: "test.tool.run", Transport: plexus.TransportCLI, Route: raw}
}

func tool(args ...string) map[string]any {
	return map[string]any{"bin": "faketool", "args": args}
}

func dispatch(t *testing.T, tr *cliexec.Transport, e plexus.Entry, input map[string]any) plexus.TransportResult {
	t.Helper()
	return tr.Dispatch(context.Background(), e, input, plexus.DispatchContext{})
}

func mustOK(t *testing.T, res plexus.TransportResult) any {
	t.Helper()
	if !res.OK || res.Error != nil {
		t.Fatalf("dispatch failed: %v", res.Error)
	}
	return res.Data
}

// mustFail checks the result is a failure with code whose message contains
// each of parts, and returns the error.
func mustFail(t *testing.T, res plexus.TransportResult, code plexus.ErrorCode, parts ...string) *plexus.Error {
	t.Helper()
	if res.OK || res.Error == nil {
		t.Fatalf("dispatch succeeded with %#v; want %s", res.Data, code)
	}
	if res.Error.Code != code {
		t.Fatalf("code = %s (%q), want %s", res.Error.Code, res.Error.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(res.Error.Message, p) {
			t.Errorf("message %q does not contain %q", res.Error.Message, p)
		}
	}
	if res.Error.CapabilityID != "test.tool.run" {
		t.Errorf("capabilityId = %q", res.Error.CapabilityID)
	}
	return res.Error
}

// argvOf returns the argv the fake tool's "argv" mode reported.
func argvOf(t *testing.T, data any) []string {
	t.Helper()
	m, ok := data.(map[string]any)
	if !ok {
		t.Fatalf("data = %#v, want an object", data)
	}
	list, ok := m["argv"].([]any)
	if !ok {
		t.Fatalf("data = %#v, want argv", data)
	}
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = v.(string)
	}
	return out
}

// assertNoSecret fails if the secret appears anywhere in the result: the
// data, the message, the detail, or the error's text for logs.
func assertNoSecret(t *testing.T, res plexus.TransportResult) {
	t.Helper()
	parts := []any{res.Data}
	if res.Error != nil {
		parts = append(parts, res.Error.Message, res.Error.Detail, res.Error.Error())
	}
	b, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secretValue)) {
		t.Errorf("the secret appears in the result: %s", b)
	}
}

func TestDispatch(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})

	t.Run("JSONOutput", func(t *testing.T) {
		e := entry(t, tool("argv", "--name={name}", "{n}", "{big}", "{f}", "{on}", "{obj}", "{null}", "{a.b}", "{{literal}} {name}"))
		input := map[string]any{
			"name": "x y",
			"n":    json.Number("42"),
			"big":  json.Number("12345678901234567890"),
			"f":    3.5,
			"on":   true,
			"obj":  map[string]any{"k": []any{1, "<&>"}},
			"null": nil,
			"a":    map[string]any{"b": "deep"},
		}
		got := argvOf(t, mustOK(t, dispatch(t, tr, e, input)))
		want := []string{"--name=x y", "42", "12345678901234567890", "3.5", "true", `{"k":[1,"<&>"]}`, "null", "deep", "{literal} x y"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("argv (-want +got):\n%s", diff)
		}
	})

	t.Run("NumbersStayExact", func(t *testing.T) {
		e := entry(t, tool("print", "{out}"))
		got := mustOK(t, dispatch(t, tr, e, map[string]any{"out": `{"id": 12345678901234567890, "ok": true}`}))
		want := map[string]any{"id": json.Number("12345678901234567890"), "ok": true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
	})

	t.Run("SystemBinary", func(t *testing.T) {
		if _, ok := testBins(t).paths["echo"]; !ok {
			t.Skip("no /bin/echo")
		}
		for _, bin := range []string{"echo", "/bin/echo"} {
			e := entry(t, map[string]any{"bin": bin, "args": []string{"hello", "{who}"}})
			got := mustOK(t, dispatch(t, tr, e, map[string]any{"who": "$(id) world"}))
			want := map[string]any{"stdout": "hello $(id) world\n", "exitCode": 0}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: data (-want +got):\n%s", bin, diff)
			}
		}
	})
}

func TestOutputShape(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	text := func(s string) any { return map[string]any{"stdout": s, "exitCode": 0} }
	for _, tc := range []struct {
		name, printed string
		want          any
	}{
		{"Object", `{"a":1}`, map[string]any{"a": json.Number("1")}},
		{"ArrayWithSpace", "\n  [1, \"two\"]\n", []any{json.Number("1"), "two"}},
		{"Empty", "", text("")},
		{"Text", "formatted 3 files\n", text("formatted 3 files\n")},
		{"BareNumber", "42\n", text("42\n")},
		{"BareString", `"ok"`, text(`"ok"`)},
		{"TwoValues", `{"a":1}{"b":2}`, text(`{"a":1}{"b":2}`)},
		{"Truncated", `{"a":`, text(`{"a":`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustOK(t, dispatch(t, tr, entry(t, tool("print", "{out}")), map[string]any{"out": tc.printed}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("InvalidUTF8", func(t *testing.T) {
		got := mustOK(t, dispatch(t, tr, entry(t, tool("badutf8")), nil))
		if diff := cmp.Diff(text("ok \uFFFD done"), got); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
	})
}

// TestArgvInjection: whatever a value holds, it arrives as exactly one
// argument, byte for byte, and nothing interprets it; a value that would
// start an argument with "-" before a literal "--" is refused instead, so
// the program never reads input as an option.
func TestArgvInjection(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	dir := t.TempDir()
	canary := filepath.Join(dir, "pwned")
	e := entry(t, tool("argv", "{v}", "--file={v}", "--", "{v}"))
	for _, v := range []string{
		"; rm -rf ~",
		"; touch " + canary,
		"$(touch " + canary + ")",
		"`touch " + canary + "`",
		"&& touch " + canary,
		"| touch " + canary,
		"a b\tc",
		"line1\nline2",
		"-rf",
		"--help",
		`' " \`,
		"*",
		"~",
		"$HOME",
		"{v}",
		"}{",
		"",
		"x\u202Ey",
	} {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			if strings.HasPrefix(v, "-") {
				mustFail(t, dispatch(t, tr, e, map[string]any{"v": v}), plexus.CodeSchemaValidationFailed, `input field "v" starts with "-"`)
				return
			}
			got := argvOf(t, mustOK(t, dispatch(t, tr, e, map[string]any{"v": v})))
			want := []string{v, "--file=" + v, "--", v}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := os.Stat(canary); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an injected command ran: %s exists (%v)", canary, err)
	}

	t.Run("NUL", func(t *testing.T) {
		mustFail(t, dispatch(t, tr, e, map[string]any{"v": "a\x00b"}), plexus.CodeTransportError, "NUL")
	})
	t.Run("OptionAfterDashDash", func(t *testing.T) {
		after := entry(t, tool("argv", "--file={v}", "--", "{v}"))
		for _, v := range []any{"-rf", "--help", json.Number("-5")} {
			got := argvOf(t, mustOK(t, dispatch(t, tr, after, map[string]any{"v": v})))
			s := fmt.Sprint(v)
			if diff := cmp.Diff([]string{"--file=" + s, "--", s}, got); diff != "" {
				t.Errorf("argv of %q (-want +got):\n%s", s, diff)
			}
		}
	})
	t.Run("OptionNumber", func(t *testing.T) {
		mustFail(t, dispatch(t, tr, e, map[string]any{"v": json.Number("-1")}), plexus.CodeSchemaValidationFailed, "starts with")
	})
}

func TestMissingField(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	for _, tc := range []struct {
		name  string
		arg   string
		input map[string]any
		field string
	}{
		{"Absent", "{path}", map[string]any{"other": "x"}, `"path"`},
		{"NilInput", "--file={path}", nil, `"path"`},
		{"NestedAbsent", "{a.b}", map[string]any{"a": map[string]any{"c": 1}}, `"a.b"`},
		{"NestedNotObject", "{a.b}", map[string]any{"a": "text"}, `"a.b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := dispatch(t, tr, entry(t, tool("argv", tc.arg)), tc.input)
			mustFail(t, res, plexus.CodeTransportError, "route.args[1]", tc.field, "missing")
		})
	}
}

func TestRouteErrors(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	for _, tc := range []struct {
		name string
		decl map[string]any
		want string
	}{
		{"NoBin", map[string]any{"args": []string{"x"}}, "route.bin is required"},
		{"BinNotString", map[string]any{"bin": 7}, "route.bin must be a string"},
		{"RelativeBinDot", map[string]any{"bin": "./faketool"}, "relative path"},
		{"RelativeBinDir", map[string]any{"bin": "bin/faketool"}, "relative path"},
		{"ArgsNotList", map[string]any{"bin": "faketool", "args": "argv {x}"}, "route.args must be a list of strings"},
		{"ArgsNotStrings", map[string]any{"bin": "faketool", "args": []any{"argv", 1}}, "route.args must be a list of strings"},
		{"Unclosed", tool("argv", "{path"), `route.args[1]: unclosed "{"`},
		{"LoneClose", tool("argv", "a}b"), `route.args[1]: lone "}"`},
		{"EmptyPlaceholder", tool("argv", "{}"), "names no field"},
		{"EmptyPathSegment", tool("argv", "{a..b}"), "names no field"},
		{"TimeoutNegative", map[string]any{"bin": "faketool", "timeoutMs": -1}, "route.timeoutMs"},
		{"TimeoutFraction", map[string]any{"bin": "faketool", "timeoutMs": 1.5}, "route.timeoutMs"},
		{"TimeoutString", map[string]any{"bin": "faketool", "timeoutMs": "500"}, "route.timeoutMs"},
		{"SecretString", map[string]any{"bin": "faketool", "secret": secretName}, "route.secret must be an object"},
		{"SecretNoName", map[string]any{"bin": "faketool", "secret": map[string]any{"as": "X"}}, "route.secret.name is missing"},
		{"SecretBearer", map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName, "attach": "bearer"}}, `attach "bearer" is not available`},
		{"SecretBadName", map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName, "as": "1-BAD"}}, "not a valid environment variable name"},
		{"SecretPATH", map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName, "as": "PATH"}}, "reserved"},
		{"SecretLoader", map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName, "as": "LD_PRELOAD"}}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustFail(t, dispatch(t, tr, entry(t, tc.decl), nil), plexus.CodeTransportError, tc.want)
		})
	}
	t.Run("SecretUndeclared", func(t *testing.T) {
		decl := map[string]any{"bin": "faketool", "secret": map[string]any{"name": "other-token", "attach": "env"}}
		mustFail(t, dispatch(t, tr, entry(t, decl, plexus.ExtensionSecretRef{Name: secretName}), nil), plexus.CodeTransportError, "not declared")
	})
	t.Run("NotAnObject", func(t *testing.T) {
		e := plexus.Entry{ID: "test.tool.run", Route: json.RawMessage(`{"route": ["faketool"]}`)}
		mustFail(t, dispatch(t, tr, e, nil), plexus.CodeTransportError, "not a JSON object")
	})
	t.Run("UnknownKeysIgnored", func(t *testing.T) {
		decl := tool("argv", "ok")
		decl["attachSkills"] = []string{"how-to"}
		decl["futureKey"] = map[string]any{"x": 1}
		if got := argvOf(t, mustOK(t, dispatch(t, tr, entry(t, decl), nil))); !cmp.Equal(got, []string{"ok"}) {
			t.Errorf("argv = %q", got)
		}
	})
}

func TestBinaryResolution(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	notExec := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bin string
		code      plexus.ErrorCode
		want      string
	}{
		{"NotOnPATH", "no-such-tool", plexus.CodeSourceUnavailable, "no-such-tool is not installed"},
		{"AbsentAbsolute", "/nonexistent/dir/tool", plexus.CodeSourceUnavailable, "is not installed"},
		{"NotExecutable", notExec, plexus.CodeTransportError, "not an executable file"},
		{"Directory", t.TempDir(), plexus.CodeTransportError, "not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustFail(t, dispatch(t, tr, entry(t, map[string]any{"bin": tc.bin}), nil), tc.code, tc.want)
		})
	}
}

func TestNonZeroExit(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	sec := map[string]any{"name": secretName}

	t.Run("ShortStderr", func(t *testing.T) {
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"fail", "3", secretVar, "10"}, "secret": sec})
		res := dispatch(t, tr, e, nil)
		perr := mustFail(t, res, plexus.CodeTransportError, "faketool exited with status 3", "error: token [redacted] rejected",
			"key [redacted], pat [redacted])")
		assertNoSecret(t, res)
		for _, cred := range []string{"plx_live_", "plx_agent_", "AbC-12_x"} {
			if strings.Contains(perr.Message, cred) {
				t.Errorf("message %q holds %q", perr.Message, cred)
			}
		}
		d, _ := perr.Detail.(map[string]any)
		if d["exitCode"] != 3 || !strings.HasSuffix(perr.Message, d["stderr"].(string)) {
			t.Errorf("detail = %#v", perr.Detail)
		}
	})

	// 100 KiB of noise: more than the kept tail, far more than the excerpt.
	t.Run("LongStderr", func(t *testing.T) {
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"fail", "1", secretVar, "102400"}, "secret": sec})
		res := dispatch(t, tr, e, nil)
		perr := mustFail(t, res, plexus.CodeTransportError, "exited with status 1: …", "token [redacted] rejected")
		assertNoSecret(t, res)
		ex := perr.Detail.(map[string]any)["stderr"].(string)
		if !utf8.ValidString(ex) || len(ex) > 1024+len("…") {
			t.Errorf("excerpt: %d bytes, valid UTF-8 %v", len(ex), utf8.ValidString(ex))
		}
	})
}

func TestSecret(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	sum := sha256.Sum256([]byte(secretValue))
	want := map[string]any{"set": true, "len": json.Number(strconv.Itoa(len(secretValue))), "sha256": hex.EncodeToString(sum[:])}

	t.Run("DefaultVariable", func(t *testing.T) {
		// The daemon's environment holds a stale value; the resolved one wins.
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"env", secretVar}, "secret": map[string]any{"name": secretName, "attach": "env"}})
		res := dispatch(t, tr, e, nil)
		if diff := cmp.Diff(want, mustOK(t, res)); diff != "" {
			t.Errorf("what the tool saw (-want +got):\n%s", diff)
		}
		assertNoSecret(t, res)
	})

	t.Run("AsFromManifest", func(t *testing.T) {
		// route.secret names the secret; the manifest's declaration says how.
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"env", "TOOL_TOKEN"}, "secret": map[string]any{"name": secretName}},
			plexus.ExtensionSecretRef{Name: secretName, Attach: plexus.AttachEnv, As: "TOOL_TOKEN"})
		if diff := cmp.Diff(want, mustOK(t, dispatch(t, tr, e, nil))); diff != "" {
			t.Errorf("what the tool saw (-want +got):\n%s", diff)
		}
	})

	t.Run("ManifestAttachRefused", func(t *testing.T) {
		e := entry(t, map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName}},
			plexus.ExtensionSecretRef{Name: secretName, Attach: plexus.AttachBearer})
		mustFail(t, dispatch(t, tr, e, nil), plexus.CodeTransportError, `attach "bearer"`)
	})

	t.Run("NotOnArgvOrInOutput", func(t *testing.T) {
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"leak", secretVar}, "secret": map[string]any{"name": secretName}})
		res := dispatch(t, tr, e, nil)
		got := mustOK(t, res)
		wantLeak := map[string]any{"token": "[redacted]", "note": "using [redacted]", "[redacted]": "as a key"}
		if diff := cmp.Diff(wantLeak, got); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
		assertNoSecret(t, res)
	})

	t.Run("Unresolvable", func(t *testing.T) {
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"env", "X"}, "secret": map[string]any{"name": "absent"}})
		perr := mustFail(t, dispatch(t, tr, e, nil), plexus.CodeTransportError, `secret "absent" cannot be resolved`)
		if strings.Contains(perr.Message, "no secret named") {
			t.Errorf("the store's error text reached the message: %q", perr.Message)
		}
	})

	t.Run("NoStore", func(t *testing.T) {
		bare := cliexec.New(testBins(t), nil, cliexec.Options{})
		e := entry(t, map[string]any{"bin": "faketool", "secret": map[string]any{"name": secretName}})
		mustFail(t, dispatch(t, bare, e, nil), plexus.CodeTransportError, "no secret store")
	})
}

// processGone reports whether pid has exited (a zombie waiting for a
// reaper that may never come counts as exited).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, statErr := os.Stat("/proc/self/stat"); statErr == nil {
			return true
		}
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived the call", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTimeoutKillsProcessGroup: the tool starts a grandchild that ignores
// SIGTERM and holds the tool's stdout; when the time limit passes, both go.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	const grace = 300 * time.Millisecond
	tr := newTransport(t, cliexec.Options{KillGrace: grace})
	for _, tc := range []struct{ name, tool string }{
		{"ToolObeysTERM", ""},
		{"ToolIgnoresTERM", "ignore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "grandchild.pid")
			e := entry(t, map[string]any{"bin": "faketool", "args": []string{"spawn", pidfile, tc.tool}, "timeoutMs": 1000})
			start := time.Now()
			mustFail(t, dispatch(t, tr, e, nil), plexus.CodeTransportError, "faketool timed out after 1s")
			if took := time.Since(start); took > time.Second+grace+2*time.Second {
				t.Errorf("the call took %v", took)
			}
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatalf("the grandchild never started: %v", err)
			}
			pid, _ := strconv.Atoi(string(b))
			waitGone(t, pid)
		})
	}

	t.Run("CappedByMaxTimeout", func(t *testing.T) {
		capped := cliexec.New(testBins(t), nil, cliexec.Options{MaxTimeout: 400 * time.Millisecond, KillGrace: grace})
		e := entry(t, map[string]any{"bin": "faketool", "args": []string{"sleep"}, "timeoutMs": 60000})
		mustFail(t, dispatch(t, capped, e, nil), plexus.CodeTransportError, "timed out after 400ms")
	})
}

// TestBackgroundProcess: a tool that exits 0 leaving a child behind that
// holds its stdout gets its result after the grace period, and the child
// does not outlive the call.
func TestBackgroundProcess(t *testing.T) {
	const grace = 300 * time.Millisecond
	tr := newTransport(t, cliexec.Options{KillGrace: grace})
	pidfile := filepath.Join(t.TempDir(), "grandchild.pid")
	start := time.Now()
	got := mustOK(t, dispatch(t, tr, entry(t, tool("spawn", pidfile, "", "exit")), nil))
	if diff := cmp.Diff(map[string]any{"spawned": true}, got); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if took := time.Since(start); took > grace+2*time.Second {
		t.Errorf("the call took %v", took)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	waitGone(t, pid)
}

// TestEnvironment: the child gets exactly what Binaries.Env says, and a nil
// environment is an empty one, not the daemon's.
func TestEnvironment(t *testing.T) {
	checkGoroutines(t)
	t.Setenv("CLIEXEC_DAEMON_ONLY", "1")
	bs := testBins(t)
	e := entry(t, tool("environ"))
	res := dispatch(t, cliexec.New(bs, nil, cliexec.Options{}), e, nil)
	var got []string
	for _, v := range mustOK(t, res).(map[string]any)["vars"].([]any) {
		got = append(got, v.(string))
	}
	if diff := cmp.Diff(bs.env, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}

	// With no environment at all the fake tool cannot know it is one, so a
	// system binary shows what it gets.
	env, err := exec.LookPath("/usr/bin/env")
	if err != nil {
		t.Skip("no /usr/bin/env")
	}
	bs.env = nil
	res = dispatch(t, cliexec.New(bs, nil, cliexec.Options{}), entry(t, map[string]any{"bin": env}), nil)
	if diff := cmp.Diff(map[string]any{"stdout": "", "exitCode": 0}, mustOK(t, res)); diff != "" {
		t.Errorf("a nil environment (-want +got):\n%s", diff)
	}
}

func TestContext(t *testing.T) {
	const grace = 300 * time.Millisecond
	tr := newTransport(t, cliexec.Options{KillGrace: grace})
	e := entry(t, tool("sleep", "ignore"))

	t.Run("Canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		res := tr.Dispatch(ctx, e, nil, plexus.DispatchContext{})
		mustFail(t, res, plexus.CodeTransportError, "faketool was stopped: context canceled")
		if took := time.Since(start); took > 300*time.Millisecond+grace+2*time.Second {
			t.Errorf("the call took %v", took)
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		res := tr.Dispatch(ctx, e, nil, plexus.DispatchContext{})
		mustFail(t, res, plexus.CodeTransportError, "faketool was stopped: context deadline exceeded")
	})

	t.Run("AlreadyCanceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		mustFail(t, tr.Dispatch(ctx, e, nil, plexus.DispatchContext{}), plexus.CodeTransportError, "context canceled")
	})
}

func TestOutputLimit(t *testing.T) {
	const limit = 64 << 10
	tr := newTransport(t, cliexec.Options{MaxOutput: limit, KillGrace: 300 * time.Millisecond})

	t.Run("AtLimit", func(t *testing.T) {
		got := mustOK(t, dispatch(t, tr, entry(t, tool("big", strconv.Itoa(limit))), nil))
		if s := got.(map[string]any)["stdout"].(string); len(s) != limit {
			t.Errorf("stdout: %d bytes, want %d", len(s), limit)
		}
	})
	t.Run("OneOver", func(t *testing.T) {
		mustFail(t, dispatch(t, tr, entry(t, tool("big", strconv.Itoa(limit+1))), nil),
			plexus.CodeTransportError, "output exceeds 65536 bytes")
	})
	t.Run("Endless", func(t *testing.T) {
		start := time.Now()
		mustFail(t, dispatch(t, tr, entry(t, tool("flood")), nil), plexus.CodeTransportError, "output exceeds 65536 bytes")
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the call took %v", took)
		}
	})
}

// TestConcurrentDispatch: calls in flight at once each get their own
// argv, environment and output (run with -race).
func TestConcurrentDispatch(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	e := entry(t, map[string]any{"bin": "faketool", "args": []string{"argv", "{i}", "{s}"}, "secret": map[string]any{"name": secretName}})
	const callers, calls = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for c := range callers {
		wg.Go(func() {
			for n := range calls {
				s := fmt.Sprintf("caller %d; call %d", c, n)
				res := tr.Dispatch(context.Background(), e, map[string]any{"i": c*calls + n, "s": s}, plexus.DispatchContext{})
				if !res.OK {
					errs <- res.Error
					continue
				}
				got := res.Data.(map[string]any)["argv"].([]any)
				if want := []any{strconv.Itoa(c*calls + n), s}; !cmp.Equal(got, want) {
					errs <- fmt.Errorf("argv = %q, want %q", got, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRunsPinned: an entry runs only the file its program resolved to when
// it was materialized (route "runs"). Once the link it names is pointed at
// a shell, the call is refused as source_unavailable, naming both files,
// and nothing runs; an entry without "runs" is not checked.
func TestRunsPinned(t *testing.T) {
	tr := newTransport(t, cliexec.Options{})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runs, err := filepath.EvalSymlinks(self)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "editor")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	pinned := func(runs string) plexus.Entry {
		e := entry(t, map[string]any{"bin": link, "args": []string{"argv", "ok"}})
		var xr plexus.ExtensionRoute
		if err := json.Unmarshal(e.Route, &xr); err != nil {
			t.Fatal(err)
		}
		xr.Runs = runs
		raw, err := json.Marshal(xr)
		if err != nil {
			t.Fatal(err)
		}
		e.Route = raw
		return e
	}
	if got := argvOf(t, mustOK(t, dispatch(t, tr, pinned(runs), nil))); !cmp.Equal(got, []string{"ok"}) {
		t.Fatalf("the pinned file: argv = %q", got)
	}

	canary := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "swapped")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran > "+canary+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(script, link); err != nil {
		t.Fatal(err)
	}
	swapped, err := filepath.EvalSymlinks(script)
	if err != nil {
		t.Fatal(err)
	}
	mustFail(t, dispatch(t, tr, pinned(runs), nil), plexus.CodeSourceUnavailable, link+" now resolves to "+swapped, "not to "+runs)
	if _, err := os.Stat(canary); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the swapped program ran (stat: %v)", err)
	}
	// Without "runs" (a program not installed at materialization) it runs.
	mustOK(t, dispatch(t, tr, pinned(""), nil))
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the unpinned entry did not run the program: %v", err)
	}
}
