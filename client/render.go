package client

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/plexus-gw/plexus"
)

// Narrate relays the gateway-authored narration of a pending grant for the
// capability id.
func Narrate(w io.Writer, id string, p plexus.GrantPendingResponse) {
	said := false
	for _, n := range p.PendingNarration {
		line := n.Summary
		if line == "" {
			line = n.NotificationLine
		}
		if line != "" {
			fmt.Fprintln(w, line)
			said = true
		}
	}
	if !said {
		fmt.Fprintf(w, "The grant for %s needs the owner's approval.\n", id)
	}
}

// WriteOutput prints an invoke's result: text raw (a string output, an
// output object's "content" string, an MCP result's text content), anything
// else as indented JSON.
func WriteOutput(w io.Writer, resp *plexus.InvokeResponse) error {
	text, ok := OutputText(resp)
	if !ok {
		v := resp.Output
		if v == nil && len(resp.MCPResult) > 0 {
			v = resp.MCPResult
		}
		if v == nil {
			return nil
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err := io.WriteString(w, text)
	return err
}

// OutputText is resp's result as text, when it is text: a string output, an
// output object's "content" string, or an MCP result whose content is all
// text (joined by newlines).
func OutputText(resp *plexus.InvokeResponse) (string, bool) {
	switch v := resp.Output.(type) {
	case string:
		return v, true
	case map[string]any:
		s, ok := v["content"].(string)
		return s, ok
	case nil:
	default:
		return "", false
	}
	if len(resp.MCPResult) == 0 {
		return "", false
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(resp.MCPResult, &r) != nil || len(r.Content) == 0 {
		return "", false
	}
	parts := make([]string, len(r.Content))
	for i, c := range r.Content {
		if c.Type != "text" {
			return "", false
		}
		parts[i] = c.Text
	}
	return strings.Join(parts, "\n"), true
}

// WriteProgress shows one piece of a running call: a text chunk as it is
// (a line at a time), a partial result as JSON, a progress report as
// "progress n/total message".
func WriteProgress(w io.Writer, ev plexus.InvokeProgressEvent) {
	switch ev.Channel {
	case "progress":
		var b strings.Builder
		b.WriteString("progress")
		if ev.Progress != nil {
			fmt.Fprintf(&b, " %g", *ev.Progress)
			if ev.Total != nil {
				fmt.Fprintf(&b, "/%g", *ev.Total)
			}
		}
		if ev.Message != "" {
			b.WriteString(" " + ev.Message)
		}
		fmt.Fprintln(w, b.String())
		return
	}
	if m, ok := ev.Data.(map[string]any); ok {
		if text, ok := m["text"].(string); ok {
			fmt.Fprint(w, text)
			if !strings.HasSuffix(text, "\n") {
				fmt.Fprintln(w)
			}
			return
		}
		if j, ok := m["json"]; ok {
			b, _ := json.Marshal(j)
			fmt.Fprintf(w, "partial result: %s\n", b)
			return
		}
	}
	b, _ := json.Marshal(ev.Data)
	fmt.Fprintf(w, "%s: %s\n", ev.Channel, b)
}
