package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestParseKeyValues(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		base map[string]any
		want map[string]any
		ok   bool
	}{
		{"String", []string{"path=notes/a.md"}, nil, map[string]any{"path": "notes/a.md"}, true},
		{"Number", []string{"limit=5"}, nil, map[string]any{"limit": float64(5)}, true},
		{"Bool", []string{"dry=true"}, nil, map[string]any{"dry": true}, true},
		{"Object", []string{`opts={"a":1}`}, nil, map[string]any{"opts": map[string]any{"a": float64(1)}}, true},
		{"Array", []string{`tags=["x","y"]`}, nil, map[string]any{"tags": []any{"x", "y"}}, true},
		{"QuotedString", []string{`n="5"`}, nil, map[string]any{"n": "5"}, true},
		{"Null", []string{"x=null"}, nil, map[string]any{"x": nil}, true},
		{"NotJSON", []string{"q=hello world"}, nil, map[string]any{"q": "hello world"}, true},
		{"Empty", []string{"q="}, nil, map[string]any{"q": ""}, true},
		{"EqualsInValue", []string{"expr=a=b"}, nil, map[string]any{"expr": "a=b"}, true},
		{"BrokenJSONIsString", []string{"x={oops"}, nil, map[string]any{"x": "{oops"}, true},
		{"MergedOverBase", []string{"limit=2"}, map[string]any{"limit": float64(9), "q": "x"}, map[string]any{"limit": float64(2), "q": "x"}, true},
		{"ErrNoEquals", []string{"limit"}, nil, nil, false},
		{"ErrEmptyKey", []string{"=5"}, nil, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKeyValues(tt.args, tt.base)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok %v", err, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); tt.ok && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseGrant(t *testing.T) {
	rw := []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}
	for _, tt := range []struct {
		in   string
		want plexus.ConnectGrant
		ok   bool
	}{
		{"portal.notes.read", plexus.ConnectGrant{CapabilityID: "portal.notes.read"}, true},
		{"portal.notes.write=read,write", plexus.ConnectGrant{CapabilityID: "portal.notes.write", Verbs: rw}, true},
		{"portal.notes.write=write, read", plexus.ConnectGrant{CapabilityID: "portal.notes.write", Verbs: rw}, true},
		{"x=execute,execute", plexus.ConnectGrant{CapabilityID: "x", Verbs: []plexus.Verb{plexus.VerbExecute}}, true},
		{"=read", plexus.ConnectGrant{}, false},
		{"", plexus.ConnectGrant{}, false},
		{"x=", plexus.ConnectGrant{}, false},
		{"x=admin", plexus.ConnectGrant{}, false},
		{"x=read,", plexus.ConnectGrant{}, false},
	} {
		got, err := parseGrant(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("parseGrant(%q) err = %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseGrant(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseWindow(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want *plexus.TrustWindow
	}{
		{"7d", &plexus.TrustWindow{Kind: plexus.Window7d}},
		{"once", &plexus.TrustWindow{Kind: plexus.WindowOnce}},
		{"until-revoked", &plexus.TrustWindow{Kind: plexus.WindowUntilRevoked}},
		{"30m", &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 30 * 60 * 1000}},
		{"3d", &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 3 * 24 * 3600 * 1000}},
		{"0s", nil},
		{"-1h", nil},
		{"forever", nil},
	} {
		got, err := parseWindow(tt.in)
		if (err == nil) != (tt.want != nil) {
			t.Errorf("parseWindow(%q) err = %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseWindow(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCompactDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		2 * time.Hour: "2h", 36 * time.Hour: "1d12h", 90 * time.Minute: "1h30m", 72 * time.Hour: "3d",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := compactDuration(in); got != want {
			t.Errorf("compactDuration(%v) = %q, want %q", in, got, want)
		}
	}
}
