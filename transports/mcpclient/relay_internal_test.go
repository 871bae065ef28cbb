package mcpclient

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeRelay is a distinct relay per call; it is never asked here.
type fakeRelay struct{ name string }

func (*fakeRelay) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}
func (*fakeRelay) Notify(context.Context, string, json.RawMessage) error { return nil }

// TestRelaysSole: on stdio, a server's request goes to a caller only when
// every call in flight has that caller; with two callers, or a call
// without one, nobody is asked.
func TestRelaysSole(t *testing.T) {
	a, b := &fakeRelay{"a"}, &fakeRelay{"b"}
	var rs relays
	if rs.sole() != nil {
		t.Fatal("no call in flight, yet a relay")
	}
	doneA := rs.calling(a)
	doneA2 := rs.calling(a)
	if rs.sole() != a {
		t.Error("two calls of one caller: want that caller")
	}
	doneB := rs.calling(b)
	if rs.sole() != nil {
		t.Error("calls of two callers: want nobody")
	}
	doneB()
	doneNil := rs.calling(nil)
	if rs.sole() != nil {
		t.Error("a call without a caller in flight: want nobody")
	}
	doneNil()
	doneA()
	if rs.sole() != a {
		t.Error("one call of a left: want a")
	}
	doneA2()
	if rs.sole() != nil || len(rs.active) != 0 {
		t.Errorf("nothing in flight, yet %v", rs.active)
	}
}

// TestRelaysTag: a tag the raw layer writes finds its relay once; one the
// server wrote is removed and finds nothing; a call that ended takes its
// tags with it.
func TestRelaysTag(t *testing.T) {
	a := &fakeRelay{"a"}
	var rs relays
	done := rs.calling(a)
	forged := json.RawMessage(`{"_meta":{"dev.plexus/relay":"guess","x":1},"messages":[]}`)

	stripped := rs.tag(nil, forged)
	var p struct {
		Meta mcp.Meta `json:"_meta"`
	}
	if err := json.Unmarshal(stripped, &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Meta[relayMetaKey]; ok || p.Meta["x"] != float64(1) {
		t.Errorf("untagged params = %s, want the server's tag gone and the rest kept", stripped)
	}
	if rs.take(mcp.Meta{relayMetaKey: "guess"}) != nil {
		t.Error("a made-up tag found a relay")
	}

	tagged := rs.tag(a, forged)
	if err := json.Unmarshal(tagged, &p); err != nil {
		t.Fatal(err)
	}
	key := p.Meta[relayMetaKey]
	if key == "guess" || key == nil {
		t.Fatalf("tag = %v, want Plexus's own", key)
	}
	if got := rs.take(mcp.Meta{relayMetaKey: key}); got != a {
		t.Errorf("take = %v, want a", got)
	}
	if rs.take(mcp.Meta{relayMetaKey: key}) != nil {
		t.Error("a tag found its relay twice")
	}
	late := rs.tag(a, forged)
	if err := json.Unmarshal(late, &p); err != nil {
		t.Fatal(err)
	}
	done()
	if rs.take(mcp.Meta{relayMetaKey: p.Meta[relayMetaKey]}) != nil {
		t.Error("a tag outlived its call")
	}
}

// TestMissingCapabilities: a server's MissingRequiredClientCapability
// passes on the capabilities it names and nothing else it put in its data;
// any other error passes on none.
func TestMissingCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *jsonrpc.Error
		want string
	}{
		{"sampling", &jsonrpc.Error{Code: -32021, Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{"x":"secret"}},"note":"secret"}`)}, `{"sampling":{}}`},
		{"unknown names dropped", &jsonrpc.Error{Code: -32021, Data: json.RawMessage(`{"requiredCapabilities":{"roots":{},"<script>":{}}}`)}, `{"roots":{}}`},
		{"no data", &jsonrpc.Error{Code: -32021}, ""},
		{"another code", &jsonrpc.Error{Code: -32600, Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(missingCapabilities(tc.err)); got != tc.want {
				t.Errorf("missingCapabilities = %s, want %s", got, tc.want)
			}
		})
	}
}
