package registry

import (
	"errors"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// Report is a manifest's offline check as a person reads it (plexus ext
// validate, and ext add or agent register before they ask): valid, or every
// rule it breaks with a fix; and the workflow members it names that are not
// declared in it.
type Report struct {
	Valid      bool              `json:"valid"`
	Problems   []ManifestProblem `json:"problems"`
	Unresolved []string          `json:"unresolved,omitempty"`
}

// ReportOf is the report of checking m, where err is what [ParseManifest]
// or [ValidateManifest] returned. ok is false when err is not a
// [*ManifestError]: a file that could not be read is not a report.
func ReportOf(m plexus.ExtensionManifest, err error) (rep Report, ok bool) {
	var me *ManifestError
	if err != nil && !errors.As(err, &me) {
		return Report{}, false
	}
	rep = Report{Valid: me == nil, Problems: []ManifestProblem{}}
	if me != nil {
		rep.Problems = me.Problems
	} else {
		rep.Unresolved = Unresolved(m, nil)
	}
	return rep, true
}

// WriteReport prints rep of m for a person: each rule broken and its fix,
// or the entries m declares and the members it leaves to the gateway.
func WriteReport(w io.Writer, m plexus.ExtensionManifest, rep Report) {
	if !rep.Valid {
		fmt.Fprintf(w, "The manifest breaks %d rule(s) of %s:\n", len(rep.Problems), plexus.ManifestVersion)
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  %s: %s\n", p.Field, p.Problem)
			if p.Fix != "" {
				fmt.Fprintf(w, "      fix: %s\n", p.Fix)
			}
		}
		return
	}
	fmt.Fprintf(w, "Valid: %s (%s), %d entries:\n", m.Source, m.Label, len(m.Capabilities))
	for _, d := range m.Capabilities {
		verbs := plexus.FormatVerbs(d.Grants)
		if verbs == "" {
			verbs = "-"
		}
		fmt.Fprintf(w, "  %s  %s  %s\n", EntryID(m.Source, d.Name), d.Kind, verbs)
	}
	for _, u := range rep.Unresolved {
		fmt.Fprintf(w, "Note: %s is not declared here; it must be registered in the gateway before this manifest.\n", u)
	}
}
