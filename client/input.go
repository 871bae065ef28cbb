package client

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// This file builds a call's input from what a person types after the
// capability id: --input '{"path":"a.md"}' and key=value pairs.

// ParseInput parses --input, which must be a JSON object; nil when s is
// blank.
func ParseInput(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, fmt.Errorf("--input: want a JSON object")
	}
	return m, nil
}

// MergePairs merges key=value arguments over base (which it does not
// modify). A value that parses as JSON (a number, a bool, an object, a
// quoted string, null) is taken as that value; anything else is the string
// itself. The first '=' separates key from value.
func MergePairs(args []string, base map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(base)+len(args))
	maps.Copy(out, base)
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
