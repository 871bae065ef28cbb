package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/registry"
	"github.com/urfave/cli/v3"
)

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one decision: what is asked, by whom, the gateway's narration and the agent's purpose",
		ArgsUsage: "<pending-id>",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(1, "<pending-id>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			p, err := adm.ShowPending(ctx, cmd.Args().First())
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, p)
			}
			if c := p.Definition; c != nil {
				fmt.Fprintf(w, "%s — %s changed the definition of %s, %s\n", p.ID, c.Source, c.EntryID, p.State)
			} else {
				fmt.Fprintf(w, "%s — %s request by %s, %s\n", p.ID, kindOr(p.Kind), p.AgentID, p.State)
			}
			fmt.Fprintf(w, "  asked %s, expires %s, trace %s\n", timeString(p.CreatedAt), timeString(p.ExpiresAt), p.TraceID)
			inbox.WriteReaches(w, p)
			if len(p.Items) > 0 {
				fmt.Fprintln(w)
			}
			for _, it := range p.Items {
				fmt.Fprintf(w, "  %s  %s  window %s  %s, %s\n", it.CapabilityID, verbsString(it.Verbs), windowString(&it.TrustWindow),
					it.Provenance, it.Sensitivity)
				if it.Constraint != nil {
					b, _ := json.Marshal(it.Constraint)
					fmt.Fprintf(w, "      only for input matching %s\n", b)
				}
				for _, m := range it.Members {
					fmt.Fprintf(w, "      also runs %s (%s)\n", m.ID, verbsString(m.Verbs))
				}
			}
			if len(p.Narration) > 0 {
				fmt.Fprintln(w)
				for _, n := range p.Narration {
					fmt.Fprintf(w, "  %s\n", n.Summary)
				}
			}
			if p.Bundle != nil && p.Bundle.Name != "" {
				fmt.Fprintf(w, "\n  task bundle (the agent's name for it): %q\n", p.Bundle.Name)
			}
			writeAgentWords(w, p)
			if c := p.Definition; c != nil {
				writeDefinitionChange(w, *c)
			}
			if p.State == plexus.StatePending {
				window := " [--window …]"
				if p.Definition != nil || p.Extension != nil {
					window = "" // decided as a whole
				}
				fmt.Fprintf(w, "\nDecide with: plexus approve %s%s | plexus reject %s --reason \"…\"\n", p.ID, window, p.ID)
				return nil
			}
			decided := ""
			if p.DecidedAt != nil {
				decided = " at " + timeString(*p.DecidedAt)
			}
			fmt.Fprintf(w, "\n%s by %s via %s%s", strings.ToUpper(p.State[:1])+p.State[1:], dash(p.DecidedBy), dash(p.Via), decided)
			if p.Reason != "" {
				fmt.Fprintf(w, ": %s", p.Reason)
			}
			fmt.Fprintln(w)
			return nil
		}),
	}
}

func kindOr(k string) string {
	if k == "" {
		return plexus.PendingGrant
	}
	return k
}

// writeDefinitionChange shows, top-level field by field, what a server
// changed in a definition (the decision file shows each side in full).
func writeDefinitionChange(w io.Writer, c plexus.DefinitionChange) {
	var old, cur map[string]json.RawMessage
	_ = json.Unmarshal(c.Old, &old)
	_ = json.Unmarshal(c.New, &cur)
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	fmt.Fprintf(w, "\n  Changed since you accepted it (sha256 %s → %s):\n", short(c.OldHash), short(c.NewHash))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		a, b := old[k], cur[k]
		if bytes.Equal(compactJSON(a), compactJSON(b)) {
			continue
		}
		fmt.Fprintf(w, "    %s:\n      was: %s\n      now: %s\n", k, clipJSON(a), clipJSON(b))
	}
}

func compactJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

// clipJSON is raw on one line, cut to 200 runes, with control and format
// characters escaped (a server's text must not restyle the terminal).
func clipJSON(raw json.RawMessage) string {
	if raw == nil {
		return "(absent)"
	}
	s := string(compactJSON(raw))
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == 200 {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// writeAgentWords prints, last and marked, the text the agent wrote: its
// purpose and, for a registration, the manifest's labels and descriptions.
func writeAgentWords(w io.Writer, p plexus.Pending) {
	var lines []string
	if p.Purpose != "" {
		lines = append(lines, "purpose: "+strconv.Quote(p.Purpose))
	}
	if m := p.Extension; m != nil {
		lines = append(lines, "extension label: "+strconv.Quote(m.Label))
		for _, d := range m.Capabilities {
			lines = append(lines, registry.EntryID(m.Source, d.Name)+": "+strconv.Quote(oneLine(d.Label, 120))+" — "+strconv.Quote(oneLine(d.Describe, 300)))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\n  The agent says (its own words, not checked by Plexus):")
	for _, l := range lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
}
