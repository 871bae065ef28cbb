package registry

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A report says valid with the members left to the gateway, or every rule
// broken with its fix; an error that is not a manifest's is not a report.
func TestReport(t *testing.T) {
	valid := loadManifest(t, "notes-workflow.json")
	valid.Capabilities[2].Members[0].ID = "portal.notes.read"
	broken := loadManifest(t, "obsidian.json")
	broken.Source = ""

	t.Run("Valid", func(t *testing.T) {
		rep, ok := ReportOf(valid, ValidateManifest(valid, nil))
		if !ok || !rep.Valid || len(rep.Problems) != 0 || rep.Problems == nil || len(rep.Unresolved) != 1 {
			t.Fatalf("ReportOf = %+v, %v", rep, ok)
		}
		var b bytes.Buffer
		WriteReport(&b, valid, rep)
		for _, want := range []string{"Valid: " + valid.Source, "Note: " + rep.Unresolved[0] + " is not declared here"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, b.String())
			}
		}
	})
	t.Run("ErrBroken", func(t *testing.T) {
		rep, ok := ReportOf(broken, ValidateManifest(broken, nil))
		if !ok || rep.Valid || len(rep.Problems) == 0 || rep.Unresolved != nil {
			t.Fatalf("ReportOf = %+v, %v", rep, ok)
		}
		var b bytes.Buffer
		WriteReport(&b, broken, rep)
		if p := rep.Problems[0]; !strings.Contains(b.String(), "  "+p.Field+": "+p.Problem+"\n") {
			t.Errorf("report lacks the first problem %+v:\n%s", p, b.String())
		}
	})
	t.Run("ErrNotAManifest", func(t *testing.T) {
		if _, ok := ReportOf(valid, errors.New("open x.json: no such file")); ok {
			t.Error("a read error made a report")
		}
	})
}
