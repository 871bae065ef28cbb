package client

import (
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestOutputText(t *testing.T) {
	for _, tt := range []struct {
		name string
		resp plexus.InvokeResponse
		want string
		ok   bool
	}{
		{"String", plexus.InvokeResponse{Output: "hi"}, "hi", true},
		{"Content", plexus.InvokeResponse{Output: map[string]any{"content": "body", "path": "a.md"}}, "body", true},
		{"Object", plexus.InvokeResponse{Output: map[string]any{"n": 1.0}}, "", false},
		{"MCPText", plexus.InvokeResponse{MCPResult: []byte(`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`)}, "a\nb", true},
		{"MCPImage", plexus.InvokeResponse{MCPResult: []byte(`{"content":[{"type":"image","data":"…"}]}`)}, "", false},
	} {
		got, ok := OutputText(&tt.resp)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: outputText = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
