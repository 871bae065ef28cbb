package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plexus-gw/plexus"
)

// printJSON writes v as indented JSON, the --json form of every listing.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for a human table; Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

func verbsString(vs []plexus.Verb) string {
	if len(vs) == 0 {
		return "-"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}

func windowString(tw *plexus.TrustWindow) string { return dash(plexus.FormatTrustWindow(tw)) }

// timeString formats t for a table in local time; far-future until-revoked
// stamps read as "never".
func timeString(t time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case time.Until(t) > 50*365*24*time.Hour:
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04")
}

// roughly formats d for a person: "15 min", "2 h", "3 days".
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
