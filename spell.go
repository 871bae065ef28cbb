package plexus

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file is how a person types verbs, trust windows and starting grants
// on the command line (plexus agents connect --grant cap=read,write
// --window 36h), and how a window reads back in a table. The decision file
// has its own spelling of a window (inbox.FormatWindow), which also folds a
// custom window as long as a named one into the name; this one keeps what
// was typed.

// ParseVerbs parses a comma-separated verb list ("read,write") into the
// canonical order.
func ParseVerbs(s string) ([]Verb, error) {
	var vs []Verb
	for _, part := range strings.Split(s, ",") {
		v := Verb(strings.TrimSpace(part))
		if !v.Valid() {
			return nil, fmt.Errorf("verb %q: want read, write or execute", part)
		}
		vs = append(vs, v)
	}
	return NormalizeVerbs(vs), nil
}

// FormatVerbs writes vs as [ParseVerbs] reads them, comma-separated in the
// order given ("read,write"); "" for none.
func FormatVerbs(vs []Verb) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}

// ParseConnectGrant parses <capability>[=verbs]; without verbs the gateway
// applies its default (read). The error does not repeat s: the caller names
// the flag it came from.
func ParseConnectGrant(s string) (ConnectGrant, error) {
	id, verbs, hasVerbs := strings.Cut(s, "=")
	id = strings.TrimSpace(id)
	if id == "" {
		return ConnectGrant{}, fmt.Errorf("want <capability>[=verbs]")
	}
	g := ConnectGrant{CapabilityID: id}
	if hasVerbs {
		vs, err := ParseVerbs(verbs)
		if err != nil {
			return ConnectGrant{}, err
		}
		g.Verbs = vs
	}
	return g, nil
}

// ParseTrustWindow parses a trust window: once, 1h, 1d, 7d, until-revoked,
// or a custom duration such as 30m, 12h or 3d.
func ParseTrustWindow(s string) (*TrustWindow, error) {
	switch k := TrustWindowKind(s); k {
	case WindowOnce, Window1h, Window1d, Window7d, WindowUntilRevoked:
		return &TrustWindow{Kind: k}, nil
	}
	d, err := parseDays(s)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("window %q: want once, 1h, 1d, 7d, until-revoked or a duration like 30m, 12h, 3d", s)
	}
	return &TrustWindow{Kind: WindowCustom, Ms: d.Milliseconds()}, nil
}

// parseDays is time.ParseDuration plus a whole-days form ("3d").
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// FormatTrustWindow writes tw as [ParseTrustWindow] reads it: the kind's
// name, or a custom window's duration in days, hours and minutes; "" for
// no window.
func FormatTrustWindow(tw *TrustWindow) string {
	switch {
	case tw == nil || tw.Kind == "":
		return ""
	case tw.Kind == WindowCustom:
		return compactDuration(time.Duration(tw.Ms) * time.Millisecond)
	}
	return string(tw.Kind)
}

// compactDuration writes a window as an owner would type it: 3d, 2h, 1d12h,
// 90m; anything finer falls back to Go's form.
func compactDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d <= 0 || d%time.Minute != 0 {
		return d.String()
	}
	var b strings.Builder
	if n := d / day; n > 0 {
		fmt.Fprintf(&b, "%dd", n)
		d -= n * day
	}
	if n := d / time.Hour; n > 0 {
		fmt.Fprintf(&b, "%dh", n)
		d -= n * time.Hour
	}
	if n := d / time.Minute; n > 0 {
		fmt.Fprintf(&b, "%dm", n)
	}
	return b.String()
}
