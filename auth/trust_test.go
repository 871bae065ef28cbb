package auth

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

var (
	fp   = plexus.ProvenanceFirstParty
	mgd  = plexus.ProvenanceManaged
	ext  = plexus.ProvenanceExtension
	rd   = plexus.VerbRead
	wr   = plexus.VerbWrite
	ex   = plexus.VerbExecute
	once = plexus.TrustWindow{Kind: plexus.WindowOnce}
	w1h  = plexus.TrustWindow{Kind: plexus.Window1h}
	w1d  = plexus.TrustWindow{Kind: plexus.Window1d}
	w7d  = plexus.TrustWindow{Kind: plexus.Window7d}
	wUR  = plexus.TrustWindow{Kind: plexus.WindowUntilRevoked}
)

// defaultPolicy is the spec's defaults: 15-minute tokens, custom trust
// windows capped at 30 days.
func defaultPolicy() Policy {
	return Policy{TokenLifetime: DefaultTokenLifetime, MaxTrustWindow: DefaultMaxTrustWindow}
}

func verbs(v ...plexus.Verb) []plexus.Verb { return v }

func custom(d time.Duration) plexus.TrustWindow {
	return plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: d.Milliseconds()}
}

func TestPolicyLifetime(t *testing.T) {
	for p, want := range map[Policy]time.Duration{
		{}:                                    DefaultTokenLifetime,
		defaultPolicy():                       15 * time.Minute,
		{TokenLifetime: time.Second}:          time.Minute,
		{TokenLifetime: 24 * time.Hour}:       time.Hour,
		{TokenLifetime: 20 * time.Minute}:     20 * time.Minute,
		{TokenLifetime: -20 * time.Minute}:    time.Minute,
		{MaxTrustWindow: 90 * 24 * time.Hour}: DefaultTokenLifetime,
	} {
		if got := p.Lifetime(); got != want {
			t.Errorf("%+v.Lifetime() = %v, want %v", p, got, want)
		}
	}
}

func TestDefaultWindow(t *testing.T) {
	tests := []struct {
		prov  plexus.Provenance
		verbs []plexus.Verb
		want  plexus.TrustWindow
	}{
		{fp, verbs(rd), w7d},
		{mgd, verbs(rd), w7d},
		{ext, verbs(rd), w1d},
		{"", verbs(rd), w1d},
		{fp, verbs(wr), w1d},
		{mgd, verbs(wr), w1d},
		{ext, verbs(wr), w1d},
		{fp, verbs(ex), once},
		{mgd, verbs(ex), once},
		{ext, verbs(ex), once},
		{fp, verbs(rd, wr), w1d},
		{fp, verbs(rd, ex), once},
		{fp, verbs(wr, rd, ex), once},
		{fp, nil, w7d},
		{ext, nil, w1d},
	}
	for _, tt := range tests {
		if got := DefaultWindow(tt.prov, tt.verbs); got != tt.want {
			t.Errorf("DefaultWindow(%q, %v) = %v, want %v", tt.prov, tt.verbs, got, tt.want)
		}
	}
}

func TestChooseWindow(t *testing.T) {
	p := defaultPolicy()
	tight := Policy{MaxTrustWindow: 3 * 24 * time.Hour}
	ptr := func(w plexus.TrustWindow) *plexus.TrustWindow { return &w }
	tests := []struct {
		name  string
		p     Policy
		prov  plexus.Provenance
		verbs []plexus.Verb
		req   *plexus.TrustWindow
		admin bool
		want  plexus.TrustWindow
	}{
		{"NilRequestDefault", p, fp, verbs(rd), nil, false, w7d},
		{"NilRequestDefaultAdmin", p, ext, verbs(rd), nil, true, w1d},

		{"ExecuteAgentAsks7d", p, fp, verbs(ex), ptr(w7d), false, once},
		{"ExecuteAdminAsksUntilRevoked", p, fp, verbs(ex), ptr(wUR), true, once},
		{"ExecuteAdminAsksCustom30d", p, mgd, verbs(ex), ptr(custom(30 * 24 * time.Hour)), true, once},
		{"ExecuteWithReadAdmin7d", p, fp, verbs(rd, ex), ptr(w7d), true, once},
		{"ExecuteNilRequest", p, ext, verbs(ex), nil, true, once},

		{"AgentShortens", p, fp, verbs(rd), ptr(w1h), false, w1h},
		{"AgentAsksOnce", p, fp, verbs(wr), ptr(once), false, once},
		{"AgentEqualCeiling", p, fp, verbs(rd), ptr(w7d), false, w7d},
		{"AgentCannotLengthenWrite", p, fp, verbs(wr), ptr(w7d), false, w1d},
		{"AgentCannotLengthenExtRead", p, ext, verbs(rd), ptr(w7d), false, w1d},
		{"AgentNoUntilRevoked", p, fp, verbs(rd), ptr(wUR), false, w7d},
		{"AgentCustomShorter", p, fp, verbs(rd), ptr(custom(2 * time.Hour)), false, custom(2 * time.Hour)},
		{"AgentCustomLonger", p, fp, verbs(wr), ptr(custom(2 * 24 * time.Hour)), false, w1d},
		{"AgentCustomHuge", p, fp, verbs(rd), ptr(custom(365 * 24 * time.Hour)), false, w7d},

		{"AdminLengthens", p, ext, verbs(wr), ptr(w7d), true, w7d},
		{"AdminUntilRevoked", p, fp, verbs(rd, wr), ptr(wUR), true, wUR},
		{"AdminCustomCapped", p, fp, verbs(rd), ptr(custom(90 * 24 * time.Hour)), true, custom(30 * 24 * time.Hour)},
		{"AdminCustomCappedTight", tight, fp, verbs(rd), ptr(custom(10 * 24 * time.Hour)), true, custom(3 * 24 * time.Hour)},
		{"AdminCustomWithin", p, fp, verbs(rd), ptr(custom(10 * 24 * time.Hour)), true, custom(10 * 24 * time.Hour)},
		{"AdminCustomMaxInt", p, fp, verbs(rd), ptr(plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 1<<63 - 1}), true, custom(30 * 24 * time.Hour)},

		{"UnknownKind", p, fp, verbs(rd), ptr(plexus.TrustWindow{Kind: "forever"}), true, w7d},
		{"CustomZeroMs", p, fp, verbs(rd), ptr(plexus.TrustWindow{Kind: plexus.WindowCustom}), true, w7d},
		{"CustomNegativeMs", p, fp, verbs(wr), ptr(plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: -1}), false, w1d},
		{"StrayMsDropped", p, fp, verbs(rd), ptr(plexus.TrustWindow{Kind: plexus.Window1h, Ms: 99}), true, w1h},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.ChooseWindow(tt.prov, tt.verbs, tt.req, tt.admin)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ChooseWindow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	p := defaultPolicy()
	tests := []struct {
		name         string
		w            plexus.TrustWindow
		wantAt       time.Time
		wantStanding bool
	}{
		{"Once", once, t0, false},
		{"1h", w1h, t0.Add(time.Hour), true},
		{"1d", w1d, t0.Add(24 * time.Hour), true},
		{"7d", w7d, t0.Add(7 * 24 * time.Hour), true},
		{"Custom", custom(90 * time.Minute), t0.Add(90 * time.Minute), true},
		{"CustomCapped", custom(60 * 24 * time.Hour), t0.Add(30 * 24 * time.Hour), true},
		{"UntilRevoked", wUR, t0.Add(plexus.UntilRevokedHorizon), true},
		{"UnknownFailsClosed", plexus.TrustWindow{Kind: "bogus"}, t0, false},
		{"CustomZeroFailsClosed", plexus.TrustWindow{Kind: plexus.WindowCustom}, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, standing := p.Expiry(tt.w, t0)
			if !at.Equal(tt.wantAt) || standing != tt.wantStanding {
				t.Errorf("Expiry = (%v, %v), want (%v, %v)", at, standing, tt.wantAt, tt.wantStanding)
			}
		})
	}
	if got := plexus.UntilRevokedHorizon; t0.Add(got).Year() > 9999 {
		t.Errorf("until-revoked expiry %v is not RFC 3339 representable", t0.Add(got))
	}
}

func TestNarrower(t *testing.T) {
	tests := []struct {
		a, b plexus.TrustWindow
		want bool
	}{
		{once, once, true},
		{once, w1h, true},
		{w1h, w1d, true},
		{w1d, w1h, false},
		{w7d, w7d, true},
		{w7d, wUR, true},
		{wUR, w7d, false},
		{wUR, wUR, true},
		{custom(time.Hour), w1h, true},
		{custom(time.Hour + time.Millisecond), w1h, false},
		{custom(10 * 24 * time.Hour), wUR, true},
		{plexus.TrustWindow{Kind: "bogus"}, w7d, false},
		{plexus.TrustWindow{Kind: plexus.WindowCustom}, w7d, false},
		{w1h, plexus.TrustWindow{Kind: "bogus"}, false},
	}
	for _, tt := range tests {
		if got := Narrower(tt.a, tt.b); got != tt.want {
			t.Errorf("Narrower(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSensitivity(t *testing.T) {
	tests := []struct {
		prov      plexus.Provenance
		transport plexus.TransportKind
		verbs     []plexus.Verb
		want      plexus.Sensitivity
	}{
		{fp, plexus.TransportPortal, verbs(rd), plexus.SensitivityLow},
		{mgd, plexus.TransportMCP, verbs(rd), plexus.SensitivityLow},
		{fp, plexus.TransportCLI, verbs(rd), plexus.SensitivityLow},
		{fp, plexus.TransportPortal, verbs(wr), plexus.SensitivityElevated},
		{mgd, plexus.TransportWorkflow, verbs(ex), plexus.SensitivityElevated},
		{ext, plexus.TransportMCP, verbs(rd), plexus.SensitivityElevated},
		{ext, plexus.TransportLocalREST, verbs(rd), plexus.SensitivityElevated},
		{"", plexus.TransportMCP, verbs(rd), plexus.SensitivityElevated},
		{ext, plexus.TransportMCP, verbs(wr), plexus.SensitivityHigh},
		{ext, plexus.TransportIPC, verbs(ex), plexus.SensitivityHigh},
		{fp, plexus.TransportCLI, verbs(wr), plexus.SensitivityHigh},
		{mgd, plexus.TransportLocalREST, verbs(ex), plexus.SensitivityHigh},
		{fp, plexus.TransportCLI, verbs(rd, ex), plexus.SensitivityHigh},
		{fp, plexus.TransportPortal, nil, plexus.SensitivityLow},
	}
	for _, tt := range tests {
		if got := Sensitivity(tt.prov, tt.transport, tt.verbs); got != tt.want {
			t.Errorf("Sensitivity(%q, %q, %v) = %q, want %q", tt.prov, tt.transport, tt.verbs, got, tt.want)
		}
	}
}
