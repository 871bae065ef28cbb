package ipc_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/transports/ipc"
)

func TestTokens(t *testing.T) {
	clock := plexustest.NewClock(t0)
	tk := ipc.NewTokens(30*time.Second, clock.Now)
	t.Run("OK", func(t *testing.T) {
		tok := tk.Issue("a")
		if len(tok) < 43 {
			t.Errorf("token %d chars, want ≥ 43 (32 random bytes)", len(tok))
		}
		if p, ok := tk.Authenticate(tok); !ok || p != "a" {
			t.Errorf("Authenticate = %q, %v", p, ok)
		}
	})
	t.Run("ErrUsed", func(t *testing.T) {
		tok := tk.Issue("a")
		tk.Authenticate(tok)
		if _, ok := tk.Authenticate(tok); ok {
			t.Error("a used token was accepted")
		}
	})
	t.Run("ErrExpired", func(t *testing.T) {
		tok := tk.Issue("a")
		clock.Set(t0.Add(31 * time.Second))
		defer clock.Set(t0)
		if _, ok := tk.Authenticate(tok); ok {
			t.Error("an expired token was accepted")
		}
	})
	t.Run("ErrRevoked", func(t *testing.T) {
		tok, other := tk.Issue("a"), tk.Issue("b")
		tk.Revoke("a")
		if _, ok := tk.Authenticate(tok); ok {
			t.Error("a revoked token was accepted")
		}
		if p, ok := tk.Authenticate(other); !ok || p != "b" {
			t.Error("revoking a's tokens touched b's")
		}
	})
	t.Run("ErrUnknown", func(t *testing.T) {
		tok := tk.Issue("a")
		for _, bad := range []string{"", "x", tok[:len(tok)-1], tok + "x", strings.ToUpper(tok)} {
			if _, ok := tk.Authenticate(bad); ok {
				t.Errorf("%q accepted", bad)
			}
		}
	})
	t.Run("Unpredictable", func(t *testing.T) {
		seen := map[string]bool{}
		for range 1000 {
			tok := tk.Issue("a")
			if seen[tok] {
				t.Fatal("a token repeated")
			}
			seen[tok] = true
		}
	})
	t.Run("ConcurrentRedemption", func(t *testing.T) {
		tok := tk.Issue("race")
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, ok := tk.Authenticate(tok); ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Errorf("%d of 100 concurrent hellos won, want exactly 1", wins)
		}
	})
}

func TestValidateProvider(t *testing.T) {
	ok := plexus.ProviderConfig{Command: "python3", Args: []string{"p.py"}}
	tests := []struct {
		name, id  string
		cfg       plexus.ProviderConfig
		wantField string // "" means valid
	}{
		{"OK", "demo-py", ok, ""},
		{"OKAbsolute", "a_1", plexus.ProviderConfig{Command: "/usr/bin/env", Restart: plexus.RestartAlways, MaxFrameBytes: 1 << 20}, ""},
		{"ErrIDUpper", "Demo", ok, ""},
		{"ErrIDDot", "a.b", ok, ""},
		{"ErrIDSlash", "a/b", ok, ""},
		{"ErrIDEmpty", "", ok, ""},
		{"ErrIDLong", strings.Repeat("a", 64), ok, ""},
		{"ErrNoCommand", "a", plexus.ProviderConfig{}, "command"},
		{"ErrRelativePath", "a", plexus.ProviderConfig{Command: "./bin/p"}, "command"},
		{"ErrNUL", "a", plexus.ProviderConfig{Command: "p", Args: []string{"x\x00"}}, "args[0]"},
		{"ErrPlexusEnv", "a", plexus.ProviderConfig{Command: "p", Env: map[string]string{"PLEXUS_SESSION_TOKEN": "x"}}, "env"},
		{"ErrPlexusEnvLower", "a", plexus.ProviderConfig{Command: "p", Env: map[string]string{"plexus_home": "x"}}, "env"},
		{"ErrEnvName", "a", plexus.ProviderConfig{Command: "p", Env: map[string]string{"A=B": "x"}}, "env"},
		{"ErrRestart", "a", plexus.ProviderConfig{Command: "p", Restart: "sometimes"}, "restart"},
		{"ErrFrameSmall", "a", plexus.ProviderConfig{Command: "p", MaxFrameBytes: 100}, "max_frame_bytes"},
		{"ErrFrameBig", "a", plexus.ProviderConfig{Command: "p", MaxFrameBytes: 1 << 30}, "max_frame_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ipc.ValidateProvider(tt.id, tt.cfg)
			wantErr := strings.HasPrefix(tt.name, "Err")
			if !wantErr {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if got.Restart == "" {
					t.Error("restart default not filled in")
				}
				return
			}
			var ce *ipc.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField {
				t.Fatalf("err = %v, want a ConfigError on field %q", err, tt.wantField)
			}
			if v := tt.cfg.Env["PLEXUS_SESSION_TOKEN"]; v != "" && strings.Contains(err.Error(), "="+v) {
				t.Errorf("the error quotes an env value: %v", err)
			}
		})
	}
}

func TestIDMapping(t *testing.T) {
	if got := ipc.EntryID("demo-py", "note.append"); got != "ipc.demo-py.note.append" {
		t.Errorf("EntryID = %s", got)
	}
	if got := ipc.SourceID("demo-py"); got != "ipc:demo-py" {
		t.Errorf("SourceID = %s", got)
	}
	if got := ipc.ToolID("demo-py", "count"); got != "demo-py/count" {
		t.Errorf("ToolID = %s", got)
	}
	verbs := []struct {
		t    ipc.Tool
		want plexus.Verb
	}{
		{ipc.Tool{}, plexus.VerbRead},
		{ipc.Tool{SideEffects: true}, plexus.VerbWrite},
		{ipc.Tool{RequiresDirective: true}, plexus.VerbExecute},
		{ipc.Tool{SideEffects: true, RequiresDirective: true}, plexus.VerbExecute},
	}
	for _, v := range verbs {
		if got := ipc.ToolVerbs(v.t); len(got) != 1 || got[0] != v.want {
			t.Errorf("ToolVerbs(%+v) = %v, want [%s]", v.t, got, v.want)
		}
	}
}
