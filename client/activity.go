package client

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// activityHeader labels the columns [WriteActivity] prints.
const activityHeader = "ID\tTIME\tACTION\tACTOR\tTARGET\tTRACE ID\tPAYLOAD\n"

// WriteActivity prints journal rows for a person (plexus journal): a header
// line, then one table line each, the payload as JSON cut to 160
// characters; or, asJSON, one JSON object per line.
func WriteActivity(w io.Writer, rows []plexus.Activity, asJSON bool) error {
	return writeActivity(w, rows, asJSON, true)
}

// WriteMoreActivity prints rows as [WriteActivity] does, without the
// header: the rows that follow it (plexus journal --follow).
func WriteMoreActivity(w io.Writer, rows []plexus.Activity, asJSON bool) error {
	return writeActivity(w, rows, asJSON, false)
}

func writeActivity(w io.Writer, rows []plexus.Activity, asJSON, header bool) error {
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
	if header {
		fmt.Fprint(tw, activityHeader)
	}
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
