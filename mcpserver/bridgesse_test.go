package mcpserver

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestSSEData: the bridge's reader of the daemon's answers hands on each
// event's data as SSE defines it, and refuses an event beyond its bound.
func TestSSEData(t *testing.T) {
	big := strings.Repeat("x", 100)
	long := strings.Repeat("y", 5000) // more than bufio's 4096
	for _, tc := range []struct {
		name, body string
		want       []string
		err        error
	}{
		{"one event", "event: message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"two events", "data: 1\n\ndata: 2\n\n", []string{"1", "2"}, nil},
		{"lines joined", "data: 1\ndata:2\n\n", []string{"1\n2"}, nil},
		{"CRLF", "event: message\r\ndata: x\r\n\r\n", []string{"x"}, nil},
		{"comments and other fields", ": ping\nid: 7\nretry: 10\nevent: message\ndata: y\n\n", []string{"y"}, nil},
		{"an event without data", "id: 1\n\ndata: z\n\n", []string{"z"}, nil},
		{"cut short by the end", "data: 1\n\ndata: 2\n", []string{"1"}, nil},
		{"a line beyond the bound", "data: " + big + "\n\n", nil, errEventTooLarge},
		{"lines beyond the bound together", strings.Repeat("data: "+big[:40]+"\n", 3) + "\n", nil, errEventTooLarge},
		{"bounds per event", strings.Repeat("data: "+big[:40]+"\n\n", 5), slices.Repeat([]string{big[:40]}, 5), nil},
		{"lines longer than the reader's buffer", "event: message\ndata: " + long + "\ndata: " + long + "\n\ndata: 2\n\n",
			[]string{long + "\n" + long, "2"}, nil},
		{"a long line beyond the bound", "data: " + long + long + long + "\n\n", nil, errEventTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			bound := 64
			if strings.Contains(tc.body, long) {
				bound = 12000 // the long lines' cases
			}
			err := sseData(strings.NewReader(tc.body), bound, func(data []byte) (bool, error) {
				got = append(got, string(data))
				return false, nil
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("data = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSSEDataStops: reading ends at the event take is done with, or fails
// on, and reads nothing after it.
func TestSSEDataStops(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		done bool
		err  error
	}{{"done", true, nil}, {"failed", false, boom}} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := sseData(strings.NewReader("data: 1\n\ndata: 2\n\n"), 64, func([]byte) (bool, error) {
				n++
				return tc.done, tc.err
			})
			if !errors.Is(err, tc.err) || n != 1 {
				t.Errorf("err %v after %d events, want %v after 1", err, n, tc.err)
			}
		})
	}
}

// BenchmarkSSEData: reading the daemon's answer to one pumped call, as
// the daemon's front door streams it (one event: its name, id and the
// JSON-RPC response).
func BenchmarkSSEData(b *testing.B) {
	body := "event: message\nid: 0_1\ndata: " +
		`{"jsonrpc":"2.0","id":"plexus-bridge-1","result":{"content":[{"type":"text","text":"hello plexus"}],"isError":false}}` + "\n\n"
	b.ReportAllocs()
	for b.Loop() {
		if err := sseData(strings.NewReader(body), bridgeMaxEvent, func([]byte) (bool, error) { return true, nil }); err != nil {
			b.Fatal(err)
		}
	}
}
