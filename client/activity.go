package client

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// WriteActivity prints journal rows for a person (plexus journal): one table
// line each, the payload as JSON cut to 160 characters; or, asJSON, one
// JSON object per line.
func WriteActivity(w io.Writer, rows []plexus.Activity, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := newTable(w)
	for _, r := range rows {
		payload := ""
		if len(r.Payload) > 0 {
			b, _ := json.Marshal(r.Payload)
			payload = string(b)
			// Shorten by characters: a byte cut can split one in two.
			if r := []rune(payload); len(r) > 160 {
				payload = string(r[:157]) + "..."
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.TS.Local().Format("2006-01-02 15:04:05"),
			r.ActionType, r.Actor, r.Target, dash(r.TraceID), payload)
	}
	return tw.Flush()
}
