package client

import (
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	tests := []struct {
		name, body string
		events     []string // "type:data"
		result     string
		err        bool
	}{
		{name: "progress then result",
			body:   "event: invoke_progress\ndata: {\"seq\":1}\n\nevent: invoke_progress\ndata: {\"seq\":2}\n\nevent: result\ndata: {\"ok\":true}\n\n",
			events: []string{`invoke_progress:{"seq":1}`, `invoke_progress:{"seq":2}`}, result: `{"ok":true}`},
		{name: "comments and multi-line data", body: ": ping\n\nevent: x\ndata: a\ndata: b\n\nevent: result\ndata:{}\n\n",
			events: []string{"x:a\nb"}, result: "{}"},
		{name: "no result", body: "event: invoke_progress\ndata: {}\n\n", events: []string{"invoke_progress:{}"}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			res, err := readEvents(strings.NewReader(tc.body), func(typ string, data []byte) { got = append(got, typ+":"+string(data)) })
			if (err != nil) != tc.err || string(res) != tc.result {
				t.Fatalf("result %q, err %v; want %q, err %v", res, err, tc.result, tc.err)
			}
			if strings.Join(got, "|") != strings.Join(tc.events, "|") {
				t.Errorf("events %q, want %q", got, tc.events)
			}
		})
	}
}
