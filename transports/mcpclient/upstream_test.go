package mcpclient_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// TestEverythingComplete: against the reference server, a completion of a
// prompt entry's argument is the server's answer for that prompt (its
// context passed on); a tool entry, which has no arguments to complete, is
// refused before anything is sent.
func TestEverythingComplete(t *testing.T) {
	failOnLeakedGoroutines(t)
	h := startClient(t, "everything", everythingConfig(t), mcpclient.Options{})
	h.waitReady(t)
	var tr plexus.Completer = h.tr
	ctx := context.Background()
	for _, tc := range []struct {
		department, value string
		want              []string
	}{
		{"Engineering", "A", []string{"Alice"}},
		{"Sales", "", []string{"David", "Eve", "Frank"}},
		{"Nowhere", "", []string{}},
	} {
		params, err := json.Marshal(map[string]any{"argument": map[string]string{"name": "name", "value": tc.value},
			"context": map[string]any{"arguments": map[string]string{"department": tc.department}}})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tr.Complete(ctx, h.entry(t, "mcp.everything.prompt.completable-prompt"), params)
		if err != nil {
			t.Fatalf("complete for %s: %v", tc.department, err)
		}
		var res struct {
			Completion struct {
				Values []string `json:"values"`
			} `json:"completion"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Completion.Values, tc.want) && (len(tc.want) != 0 || len(res.Completion.Values) != 0) {
			t.Errorf("complete name for %s %q = %v, want %v", tc.department, tc.value, res.Completion.Values, tc.want)
		}
	}
	_, err := tr.Complete(ctx, h.entry(t, "mcp.everything.echo"), []byte(`{"argument":{"name":"message","value":""}}`))
	if e := plexus.AsError(err); e == nil || e.Code != plexus.CodeInvalidRequest {
		t.Errorf("complete a tool = %v, want invalid_request", err)
	}
}
