package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// parseKeyValues merges key=value arguments over base (which it does not
// modify). A value that parses as JSON (a number, a bool, an object, a
// quoted string, null) is taken as that value; anything else is the string
// itself. The first '=' separates key from value.
func parseKeyValues(args []string, base map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(base)+len(args))
	for k, v := range base {
		out[k] = v
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want key=value", a)
		}
		var parsed any
		if err := json.Unmarshal([]byte(v), &parsed); err == nil {
			out[k] = parsed
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// parseInput parses --input, which must be a JSON object.
func parseInput(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, fmt.Errorf("--input: want a JSON object")
	}
	return m, nil
}

// parseVerbs parses a comma-separated verb list ("read,write") into the
// canonical order.
func parseVerbs(s string) ([]plexus.Verb, error) {
	var vs []plexus.Verb
	for _, part := range strings.Split(s, ",") {
		v := plexus.Verb(strings.TrimSpace(part))
		if !v.Valid() {
			return nil, fmt.Errorf("verb %q: want read, write or execute", part)
		}
		vs = append(vs, v)
	}
	return plexus.NormalizeVerbs(vs), nil
}

// parseGrant parses --grant <capability>[=verbs]; without verbs the gateway
// applies its default (read).
func parseGrant(s string) (plexus.ConnectGrant, error) {
	id, verbs, hasVerbs := strings.Cut(s, "=")
	id = strings.TrimSpace(id)
	if id == "" {
		return plexus.ConnectGrant{}, fmt.Errorf("--grant %q: want <capability>[=verbs]", s)
	}
	g := plexus.ConnectGrant{CapabilityID: id}
	if hasVerbs {
		vs, err := parseVerbs(verbs)
		if err != nil {
			return plexus.ConnectGrant{}, fmt.Errorf("--grant %q: %w", s, err)
		}
		g.Verbs = vs
	}
	return g, nil
}

// parseWindow parses a trust window: once, 1h, 1d, 7d, until-revoked, or a
// custom duration such as 30m, 12h or 3d.
func parseWindow(s string) (*plexus.TrustWindow, error) {
	switch k := plexus.TrustWindowKind(s); k {
	case plexus.WindowOnce, plexus.Window1h, plexus.Window1d, plexus.Window7d, plexus.WindowUntilRevoked:
		return &plexus.TrustWindow{Kind: k}, nil
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("window %q: want once, 1h, 1d, 7d, until-revoked or a duration like 30m, 12h, 3d", s)
	}
	return &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: d.Milliseconds()}, nil
}

// parseDuration is time.ParseDuration plus a whole-days form ("3d").
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
