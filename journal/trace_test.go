package journal

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestTraceIDs(t *testing.T) {
	td := mustOpen(t)
	for _, trace := range []string{"01AAB", "01AAC", "01AAC", "01AB0", "02AAA", ""} {
		record(t, td, trace, plexus.Activity{ActionType: "agent.connected"})
	}
	tests := []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"01AA", 10, []string{"01AAB", "01AAC"}},
		{"01AAC", 10, []string{"01AAC"}},
		{"01", 2, []string{"01AAB", "01AAC"}},
		{"01a", 10, nil},
		{"03", 10, nil},
		{"", 10, nil},
	}
	for _, tt := range tests {
		got, err := td.TraceIDs(context.Background(), tt.prefix, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("TraceIDs(%q, %d) (-want +got):\n%s", tt.prefix, tt.limit, diff)
		}
	}
}
