package client

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergePairs(t *testing.T) {
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
			got, err := MergePairs(tt.args, tt.base)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok %v", err, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); tt.ok && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
