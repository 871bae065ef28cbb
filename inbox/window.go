package inbox

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

const day = 24 * time.Hour

// namedWindows are the trust-window kinds that are spelled by name; a custom
// window of the same length is written, and read back, as the name.
var namedWindows = []plexus.TrustWindowKind{plexus.Window1h, plexus.Window1d, plexus.Window7d}

// FormatWindow writes w as the owner would type it: once, 1h, 1d, 7d,
// until-revoked, or a custom duration such as 36h, 3d or 1d12h. A custom
// window as long as a named one is written as the name, so that the file has
// one spelling per length. An invalid window is an error.
func FormatWindow(w plexus.TrustWindow) (string, error) {
	if !auth.ValidWindow(w) {
		return "", fmt.Errorf("trust window %+v is not valid", w)
	}
	if w.Kind != plexus.WindowCustom {
		return string(w.Kind), nil
	}
	d := auth.WindowDuration(w)
	for _, k := range namedWindows {
		if auth.WindowDuration(plexus.TrustWindow{Kind: k}) == d {
			return string(k), nil
		}
	}
	return compactDuration(d), nil
}

// compactDuration writes d in days, hours and minutes (3d, 36h is 1d12h,
// 90m is 1h30m); anything finer than a minute falls back to Go's form.
func compactDuration(d time.Duration) string {
	if d%time.Minute != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}

var errWindow = errors.New("want once, 1h, 1d, 7d, until-revoked, or a duration such as 36h, 3d or 1d12h")

// ParseWindow reads a window written by [FormatWindow] or by the owner: the
// names once, 1h, 1d, 7d and until-revoked, or a positive duration in Go's
// form optionally led by whole days ("36h", "3d", "1d12h", "90m"). A
// duration as long as a named window reads as that name. Case and
// surrounding spaces are forgiven; nothing else is guessed at.
func ParseWindow(s string) (plexus.TrustWindow, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch k := plexus.TrustWindowKind(s); k {
	case plexus.WindowOnce, plexus.Window1h, plexus.Window1d, plexus.Window7d, plexus.WindowUntilRevoked:
		return plexus.TrustWindow{Kind: k}, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return plexus.TrustWindow{}, fmt.Errorf("%q is not a window: %w", s, err)
	}
	for _, k := range namedWindows {
		if auth.WindowDuration(plexus.TrustWindow{Kind: k}) == d {
			return plexus.TrustWindow{Kind: k}, nil
		}
	}
	if d < time.Millisecond {
		return plexus.TrustWindow{}, fmt.Errorf("%q is not a window: shorter than a millisecond", s)
	}
	return plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: d.Milliseconds()}, nil
}

// parseDuration is time.ParseDuration led by an optional whole number of
// days. It refuses zero, negative and longer-than-until-revoked durations.
func parseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, rest, ok := strings.Cut(s, "d"); ok {
		// Go durations never contain a "d", so the cut is unambiguous.
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil || days == "" || n > uint64(plexus.UntilRevokedHorizon/day) {
			return 0, errWindow
		}
		d = time.Duration(n) * day
		s = rest
	}
	if s != "" {
		if s[0] == '-' || s[0] == '+' {
			return 0, errWindow
		}
		r, err := time.ParseDuration(s)
		if err != nil {
			return 0, errWindow
		}
		d += r
	}
	if d <= 0 {
		return 0, errWindow
	}
	if d > plexus.UntilRevokedHorizon {
		return 0, errors.New("longer than until-revoked")
	}
	return d, nil
}

// sameWindow reports whether a and b stand equally long (a custom 24h is 1d).
func sameWindow(a, b plexus.TrustWindow) bool {
	return auth.ValidWindow(a) == auth.ValidWindow(b) && auth.WindowDuration(a) == auth.WindowDuration(b)
}

// windowPhrase says for how long an approval under w stands.
func windowPhrase(w plexus.TrustWindow, verbs []plexus.Verb) string {
	if slices.Contains(verbs, plexus.VerbExecute) || w.Kind == plexus.WindowOnce {
		return "this one use only"
	}
	switch w.Kind {
	case plexus.WindowUntilRevoked:
		return "until you revoke it"
	case plexus.Window1h:
		return "for 1 hour, then Plexus asks again"
	case plexus.Window1d:
		return "for 1 day, then Plexus asks again"
	case plexus.Window7d:
		return "for 7 days, then Plexus asks again"
	}
	s, _ := FormatWindow(w)
	return "for " + s + ", then Plexus asks again"
}
