package plexus

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConnectGrant(t *testing.T) {
	rw := []Verb{VerbRead, VerbWrite}
	for _, tt := range []struct {
		in   string
		want ConnectGrant
		ok   bool
	}{
		{"portal.notes.read", ConnectGrant{CapabilityID: "portal.notes.read"}, true},
		{"portal.notes.write=read,write", ConnectGrant{CapabilityID: "portal.notes.write", Verbs: rw}, true},
		{"portal.notes.write=write, read", ConnectGrant{CapabilityID: "portal.notes.write", Verbs: rw}, true},
		{"x=execute,execute", ConnectGrant{CapabilityID: "x", Verbs: []Verb{VerbExecute}}, true},
		{"=read", ConnectGrant{}, false},
		{"", ConnectGrant{}, false},
		{"x=", ConnectGrant{}, false},
		{"x=admin", ConnectGrant{}, false},
		{"x=read,", ConnectGrant{}, false},
	} {
		got, err := ParseConnectGrant(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseConnectGrant(%q) err = %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseConnectGrant(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseTrustWindow(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want *TrustWindow
	}{
		{"7d", &TrustWindow{Kind: Window7d}},
		{"once", &TrustWindow{Kind: WindowOnce}},
		{"until-revoked", &TrustWindow{Kind: WindowUntilRevoked}},
		{"30m", &TrustWindow{Kind: WindowCustom, Ms: 30 * 60 * 1000}},
		{"3d", &TrustWindow{Kind: WindowCustom, Ms: 3 * 24 * 3600 * 1000}},
		{"0s", nil},
		{"-1h", nil},
		{"forever", nil},
	} {
		got, err := ParseTrustWindow(tt.in)
		if (err == nil) != (tt.want != nil) {
			t.Errorf("ParseTrustWindow(%q) err = %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseTrustWindow(%q) (-want +got):\n%s", tt.in, diff)
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

func TestFormatVerbs(t *testing.T) {
	for _, tt := range []struct {
		in   []Verb
		want string
	}{
		{nil, ""},
		{[]Verb{VerbRead}, "read"},
		{[]Verb{VerbWrite, VerbRead}, "write,read"}, // as given
	} {
		if got := FormatVerbs(tt.in); got != tt.want {
			t.Errorf("FormatVerbs(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if len(tt.in) > 0 {
			back, err := ParseVerbs(FormatVerbs(tt.in))
			if err != nil || !cmp.Equal(back, NormalizeVerbs(tt.in)) {
				t.Errorf("ParseVerbs(FormatVerbs(%v)) = %v, %v", tt.in, back, err)
			}
		}
	}
}
