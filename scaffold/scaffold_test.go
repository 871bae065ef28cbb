package scaffold_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/scaffold"
)

// mustInit initializes a fresh home under a temp dir.
func mustInit(tb testing.TB) string {
	tb.Helper()
	home := filepath.Join(tb.TempDir(), "plexus home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{}); err != nil {
		tb.Fatal(err)
	}
	return home
}

// snapshot records every path under home with its mode and contents.
func snapshot(tb testing.TB, home string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[strings.TrimPrefix(p, home)] = v
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestInit(t *testing.T) {
	home := filepath.Join(t.TempDir(), "nested", "home")
	res, err := scaffold.Init(home, scaffold.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, p := range res.Created {
		created = append(created, strings.TrimPrefix(p, home))
	}
	want := []string{"", "/inbox", "/active", "/rejected", "/archive", "/audit", "/secrets",
		"/connection-key", "/signing-key", "/hash-key", "/chain-key", "/token-key", "/auth-config.json", "/network.json", "/.gitignore", "/README.md"}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("Created (-want +got):\n%s", diff)
	}
	modes := map[string]fs.FileMode{
		"": 0o700, "inbox": 0o700, "active": 0o700, "rejected": 0o700, "archive": 0o700, "audit": 0o700, "secrets": 0o700,
		"connection-key": 0o600, "signing-key": 0o600, "hash-key": 0o600, "chain-key": 0o600, "token-key": 0o600, "auth-config.json": 0o600, "network.json": 0o600,
	}
	for name, mode := range modes {
		fi, err := os.Stat(filepath.Join(home, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", name, fi.Mode().Perm(), mode)
		}
	}
	key, _ := os.ReadFile(filepath.Join(home, "connection-key"))
	if !strings.HasPrefix(string(key), "plx_live_") || len(strings.TrimSpace(string(key))) != len("plx_live_")+43 {
		t.Errorf("connection-key has the wrong shape (%d bytes)", len(key))
	}
	gi, _ := os.ReadFile(filepath.Join(home, ".gitignore"))
	for _, line := range []string{"connection-key", "signing-key", "hash-key", "chain-key", "token-key", "secrets/", "journal.db*", "journal.anchor*", "audit/"} {
		if !strings.Contains(string(gi), "\n"+line+"\n") {
			t.Errorf(".gitignore does not ignore %s", line)
		}
	}
	if err := scaffold.Verify(home); err != nil {
		t.Errorf("Verify after Init: %v", err)
	}

	t.Run("SecondInitChangesNothing", func(t *testing.T) {
		before := snapshot(t, home)
		res, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: func() (string, error) {
			t.Error("a second Init generated a connection-key")
			return "", errors.New("unused")
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Created) != 0 {
			t.Errorf("second Init created %v", res.Created)
		}
		if diff := cmp.Diff(before, snapshot(t, home)); diff != "" {
			t.Errorf("second Init changed the home (-before +after):\n%s", diff)
		}
	})

	t.Run("FillsGapsOnly", func(t *testing.T) {
		os.Remove(filepath.Join(home, "hash-key"))
		os.Remove(filepath.Join(home, "inbox"))
		sk, _ := os.ReadFile(filepath.Join(home, "signing-key"))
		res, err := scaffold.Init(home, scaffold.InitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{filepath.Join(home, "inbox"), filepath.Join(home, "hash-key")}, res.Created); diff != "" {
			t.Errorf("Created (-want +got):\n%s", diff)
		}
		if sk2, _ := os.ReadFile(filepath.Join(home, "signing-key")); string(sk2) != string(sk) {
			t.Error("Init rewrote an existing signing-key")
		}
	})

	t.Run("InjectedGenerator", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "h")
		k := "plx_live_" + strings.Repeat("A", 43)
		if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: func() (string, error) { return k, nil }}); err != nil {
			t.Fatal(err)
		}
		h, err := scaffold.Load(home)
		if err != nil || h.ConnectionKey != k {
			t.Errorf("Load: key %q, %v", h.ConnectionKey, err)
		}
		bad := filepath.Join(t.TempDir(), "h")
		if _, err := scaffold.Init(bad, scaffold.InitOptions{NewConnectionKey: func() (string, error) { return "short", nil }}); err == nil {
			t.Error("Init accepted a malformed generated key")
		}
	})

	t.Run("ConcurrentInit", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "h")
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := scaffold.Init(home, scaffold.InitOptions{}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := scaffold.Verify(home); err != nil {
			t.Error(err)
		}
	})
}

func TestVerifyReportsEveryProblem(t *testing.T) {
	home := mustInit(t)
	q := "'" + home + "'" // the home has a space: hints quote it
	os.Remove(filepath.Join(home, "archive"))
	os.Chmod(filepath.Join(home, "inbox"), 0o755)
	os.Chmod(filepath.Join(home, "connection-key"), 0o644)
	os.WriteFile(filepath.Join(home, "signing-key"), []byte("abcd\n"), 0o600)
	os.WriteFile(filepath.Join(home, "hash-key"), nil, 0o600)
	os.WriteFile(filepath.Join(home, "auth-config.json"), []byte(`{"tokenLifetimeMs": 9`), 0o600)
	os.WriteFile(filepath.Join(home, "network.json"), []byte(`{"bind":"0.0.0.0","port":70000,"allowedOrigins":["http://x/y"]}`), 0o600)

	err := scaffold.Verify(home)
	var le *scaffold.LayoutError
	if !errors.As(err, &le) {
		t.Fatalf("Verify = %v, want *LayoutError", err)
	}
	got := map[string]string{}
	for _, p := range le.Problems {
		got[filepath.Base(p.Path)] += p.String() + "\n"
	}
	want := map[string][]string{
		"archive":          {"archive/ is missing; run: plexus init --home " + q},
		"inbox":            {"inbox/ is mode 0755 (group or others can enter it); run: chmod 700 " + "'" + filepath.Join(home, "inbox") + "'"},
		"connection-key":   {"connection-key is mode 0644 (group or others can read it); run: chmod 600 '" + filepath.Join(home, "connection-key") + "'"},
		"signing-key":      {"signing-key does not hold a valid key: key is 2 bytes, want at least 32", "remove it, then run: plexus init"},
		"hash-key":         {"hash-key is empty; remove it, then run: plexus init"},
		"auth-config.json": {"auth-config.json is not valid", "fix the JSON"},
		"network.json":     {`bind "0.0.0.0" is not a loopback address`, "allowNonLoopback", "port 70000 is out of range", `allowed origin "http://x/y" is not an origin`},
	}
	for name, parts := range want {
		for _, part := range parts {
			if !strings.Contains(got[name], part) {
				t.Errorf("%s: problems %q do not contain %q", name, got[name], part)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems for %d paths, want %d:\n%v", len(got), len(want), err)
	}
	if strings.Contains(err.Error(), "plx_live_") {
		t.Error("the error message contains the connection-key")
	}

	t.Run("MissingHome", func(t *testing.T) {
		err := scaffold.Verify(filepath.Join(t.TempDir(), "none"))
		if !errors.As(err, &le) || len(le.Problems) != 1 || !strings.Contains(err.Error(), "plexus init --home") {
			t.Errorf("Verify(missing home) = %v", err)
		}
	})
}

func TestLoad(t *testing.T) {
	home := mustInit(t)
	h, err := scaffold.Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.SigningKey) != 32 || len(h.HashKey) != 32 || len(h.ChainKey) != 32 || len(h.TokenKey) != 32 || !strings.HasPrefix(h.ConnectionKey, "plx_live_") {
		t.Errorf("keys: signing %d bytes, hash %d bytes, chain %d bytes, token %d bytes", len(h.SigningKey), len(h.HashKey), len(h.ChainKey), len(h.TokenKey))
	}
	if h.Anchor != filepath.Join(home, "journal.anchor") {
		t.Errorf("anchor path %q", h.Anchor)
	}
	if h.Auth.TokenLifetime() != 15*time.Minute || h.Auth.MaxTrustWindow() != 30*24*time.Hour {
		t.Errorf("auth = %+v", h.Auth)
	}
	if diff := cmp.Diff(scaffold.Network{Bind: "127.0.0.1", Port: 7077, AllowedOrigins: []string{}}, h.Network); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	if h.Journal != filepath.Join(home, "journal.db") || h.Inbox != filepath.Join(home, "inbox") || h.Dir != home {
		t.Errorf("paths: %+v", h)
	}

	writeCfg := func(t *testing.T, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ClampTokenLifetime", func(t *testing.T) {
		for body, want := range map[string]int64{
			`{"tokenLifetimeMs": 1000}`:     60000,
			`{"tokenLifetimeMs": -5}`:       60000,
			`{"tokenLifetimeMs": 99999999}`: 3600000,
			`{"tokenLifetimeMs": 120000}`:   120000,
			`{}`:                            900000,
		} {
			writeCfg(t, "auth-config.json", body)
			h, err := scaffold.Load(home)
			if err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if h.Auth.TokenLifetimeMs != want || h.Auth.MaxTrustWindowMs != 2592000000 {
				t.Errorf("%s: got %+v, want tokenLifetimeMs %d", body, h.Auth, want)
			}
		}
	})
	t.Run("BadAuthValues", func(t *testing.T) {
		for body, want := range map[string]string{
			`{"maxTrustWindowMs": -1}`:     "maxTrustWindowMs is -1",
			`{"tokenLifetime": 60000}`:     "unknown field",
			`{} {}`:                        "trailing data",
			`{"maxStreamsPerAgent": -1}`:   "maxStreamsPerAgent -1",
			`{"maxStreamsPerSession": -2}`: "maxStreamsPerSession is -2",
			`{"scrapeToken": "0123456789abcdef0123456789abcdef"}`:   "scrapeToken no longer goes here",
			`{"activityRetentionDays": -1}`:                         "activityRetentionDays is -1",
			`{"activityRetentionDays": 36501}`:                      "up to 36500 (100 years)",
			`{"activityRetentionDays": 200000000}`:                  "activityRetentionDays is 200000000",
			`{"notifyWebhook": {"url": "ftp://ntfy.sh"}}`:           "notifyWebhook.url",
			`{"notifyWebhook": {"url": "https://me:pw@ntfy.sh"}}`:   "notifyWebhook.url",
			`{"notifyWebhook": {"url": "/relative"}}`:               "notifyWebhook.url",
			`{"notifyWebhook": {"url": "https://ntfy.sh", "x": 1}}`: "unknown field",
		} {
			writeCfg(t, "auth-config.json", body)
			if _, err := scaffold.Load(home); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Load = %v, want %q", body, err, want)
			}
		}
		writeCfg(t, "auth-config.json", `{"activityRetentionDays": 30}`)
		if h, err := scaffold.Load(home); err != nil || h.Auth.ActivityRetentionDays != 30 {
			t.Errorf("a good activityRetentionDays: Load = %+v, %v", h, err)
		}
		writeCfg(t, "auth-config.json", `{"notifyWebhook": {"url": "https://ntfy.sh", "topic": "my-plexus"}}`)
		if h, err := scaffold.Load(home); err != nil || h.Auth.NotifyWebhook == nil || h.Auth.NotifyWebhook.Topic != "my-plexus" {
			t.Errorf("a good notifyWebhook: Load = %v", err)
		}
		writeCfg(t, "auth-config.json", `{}`)
	})
	t.Run("Network", func(t *testing.T) {
		for body, ok := range map[string]bool{
			`{"bind": "127.0.0.2"}`:                             true,
			`{"bind": "::1"}`:                                   true,
			`{"bind": "localhost"}`:                             true,
			`{"bind": "0.0.0.0"}`:                               false,
			`{"bind": "0.0.0.0", "allowNonLoopback": true}`:     true,
			`{"bind": "example.com", "allowNonLoopback": true}`: false,
			`{"allowedOrigins": ["http://127.0.0.1:3000"]}`:     true,
			`{"allowedOrigins": ["javascript:alert(1)"]}`:       false,
		} {
			writeCfg(t, "network.json", body)
			if _, err := scaffold.Load(home); (err == nil) != ok {
				t.Errorf("%s: Load = %v, want ok=%v", body, err, ok)
			}
		}
	})
}

func TestWriteConnectionKey(t *testing.T) {
	home := mustInit(t)
	p := filepath.Join(home, "connection-key")
	os.Chmod(p, 0o640) // the rotation also repairs a loosened mode
	k := "plx_live_" + strings.Repeat("b", 43)
	if err := scaffold.WriteConnectionKey(home, k); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if strings.TrimSpace(string(b)) != k || fi.Mode().Perm() != 0o600 {
		t.Errorf("after rotation: %q mode %04o", b, fi.Mode().Perm())
	}
	if h, err := scaffold.Load(home); err != nil || h.ConnectionKey != k {
		t.Errorf("Load after rotation: %v", err)
	}
	before := snapshot(t, home)
	for _, bad := range []string{"", "plx_live_short", "plx_agent_" + strings.Repeat("b", 43)} {
		if err := scaffold.WriteConnectionKey(home, bad); err == nil {
			t.Errorf("WriteConnectionKey accepted %q", bad)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, home)); diff != "" {
		t.Errorf("a refused rotation changed the home (-before +after):\n%s", diff)
	}

	t.Run("Atomic", func(t *testing.T) {
		// Concurrent readers only ever see a whole key, old or new.
		keys := []string{"plx_live_" + strings.Repeat("c", 43), "plx_live_" + strings.Repeat("d", 43)}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(p)
				got := strings.TrimSpace(string(b))
				if err != nil || (got != keys[0] && got != keys[1] && got != k) {
					t.Errorf("reader saw a torn key (%d bytes, %v)", len(b), err)
					return
				}
			}
		})
		for i := range 100 {
			if err := scaffold.WriteConnectionKey(home, keys[i%2]); err != nil {
				t.Error(err)
			}
		}
		close(stop)
		wg.Wait()
		names, _ := os.ReadDir(home)
		for _, n := range names {
			if strings.Contains(n.Name(), ".tmp-") {
				t.Errorf("temporary file left behind: %s", n.Name())
			}
		}
	})
}

// TestReadChainKey: the journal's verify reads the chain-key without ever
// creating one, and says plainly what is wrong with it.
func TestReadChainKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(path string)
		want  []string // parts of the error; none means OK
	}{
		{name: "OK", setup: func(string) {}},
		{name: "ErrMissing", setup: func(p string) { os.Remove(p) },
			want: []string{"chain-key is missing", "restore it from a backup"}},
		{name: "ErrShort", setup: func(p string) { os.WriteFile(p, []byte("abcd\n"), 0o600) },
			want: []string{"chain-key does not hold a valid key: key is 2 bytes", "restore the old chain-key"}},
		{name: "ErrOpen", setup: func(p string) { os.Chmod(p, 0o644) },
			want: []string{"chain-key is mode 0644 (group or others can read it)", "chmod 600"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := mustInit(t)
			p := filepath.Join(home, "chain-key")
			tc.setup(p)
			k, err := scaffold.ReadChainKey(home)
			if len(tc.want) == 0 {
				if err != nil || len(k) != 32 {
					t.Fatalf("ReadChainKey = %d bytes, %v", len(k), err)
				}
				return
			}
			if err == nil {
				t.Fatal("ReadChainKey succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(p); tc.name == "ErrMissing" && err == nil {
				t.Error("ReadChainKey created a chain-key")
			}
		})
	}
}

// TestTokenKey: the token-key that seals the OAuth sign-ins is created 0600
// by init and on the first start of an existing home without one, never
// overwritten, and must be exactly an AES-256 key.
func TestTokenKey(t *testing.T) {
	t.Run("ExistingHomeGetsOne", func(t *testing.T) {
		home := mustInit(t)
		p := filepath.Join(home, "token-key")
		if err := os.Remove(p); err != nil { // a home made before the token-key
			t.Fatal(err)
		}
		before := snapshot(t, home)
		res, err := scaffold.Init(home, scaffold.InitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{p}, res.Created); diff != "" {
			t.Errorf("Created (-want +got):\n%s", diff)
		}
		after := snapshot(t, home)
		delete(after, "/token-key")
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("Init changed more than the token-key (-before +after):\n%s", diff)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("token-key: %v, mode %v; want 0600", err, fi)
		}
		h, err := scaffold.Load(home)
		if err != nil || len(h.TokenKey) != 32 || h.TokenKeyFile != p {
			t.Fatalf("Load: %v (%d bytes at %s)", err, len(h.TokenKey), h.TokenKeyFile)
		}
	})
	t.Run("NeverOverwritten", func(t *testing.T) {
		home := mustInit(t)
		p := filepath.Join(home, "token-key")
		mine := strings.Repeat("ab", 32) + "\n"
		if err := os.WriteFile(p, []byte(mine), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := scaffold.Init(home, scaffold.InitOptions{}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != mine {
			t.Errorf("Init rewrote the token-key")
		}
		if h, err := scaffold.Load(home); err != nil || string(h.TokenKey) != strings.Repeat("\xab", 32) {
			t.Errorf("Load: %v", err)
		}
	})
	for _, tc := range []struct{ name, body, want string }{
		{"ErrShort", strings.Repeat("ab", 16), "key is 16 bytes, want at least 32"},
		{"ErrLong", strings.Repeat("ab", 48), "key is 48 bytes, want 32 (AES-256)"},
		{"ErrNotHex", strings.Repeat("zz", 32), "want hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := mustInit(t)
			if err := os.WriteFile(filepath.Join(home, "token-key"), []byte(tc.body+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := scaffold.Load(home)
			for _, w := range []string{"token-key does not hold a valid key: " + tc.want, "signed in to again: plexus mcp login NAME"} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Load = %v, want %q", err, w)
				}
			}
			if strings.Contains(fmt.Sprint(err), tc.body) {
				t.Errorf("the error holds the key")
			}
		})
	}
}
