package auth

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestCovering(t *testing.T) {
	readNotes := plexus.TokenScope{ID: "portal.notes.read", Verbs: verbs(rd)}
	inboxOnly := plexus.TokenScope{ID: "portal.notes.write", Verbs: verbs(wr), Constraint: pathC("Inbox")}
	draftsOnly := plexus.TokenScope{ID: "portal.notes.write", Verbs: verbs(rd, wr), Constraint: pathC("Drafts")}
	rw := plexus.TokenScope{ID: "gh.issue", Verbs: verbs(rd)}
	scopes := []plexus.TokenScope{readNotes, inboxOnly, draftsOnly, rw}

	tests := []struct {
		name  string
		entry plexus.Entry
		input map[string]any
		want  *plexus.TokenScope
	}{
		{"Plain", entry("portal.notes.read", fp, plexus.TransportPortal, rd), nil, &readNotes},
		{"UnknownID", entry("portal.notes.delete", fp, plexus.TransportPortal, wr), nil, nil},
		{"MissingVerb", entry("gh.issue", ext, plexus.TransportMCP, rd, wr), nil, nil},
		{"ReadScopeForWriteEntry", entry("portal.notes.read", fp, plexus.TransportPortal, wr), nil, nil},
		{"NoGrantsMeansRead", entry("portal.notes.read", fp, plexus.TransportPortal), nil, &readNotes},
		{"ConstraintHolds", entry("portal.notes.write", fp, plexus.TransportPortal, wr), map[string]any{"path": "Inbox/a"}, &inboxOnly},
		{"SecondScopeConstraint", entry("portal.notes.write", fp, plexus.TransportPortal, wr), map[string]any{"path": "Drafts/a"}, &draftsOnly},
		{"ConstraintInert", entry("portal.notes.write", fp, plexus.TransportPortal, wr), map[string]any{"path": "Secret/a"}, nil},
		{"ConstraintMissingInput", entry("portal.notes.write", fp, plexus.TransportPortal, wr), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CoveringResolved(scopes, tt.entry, tt.input, nil)
			if ok != (tt.want != nil) {
				t.Fatalf("Covering ok = %v, want %v", ok, tt.want != nil)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Covering (-want +got):\n%s", diff)
			}
		})
	}
	if _, ok := CoveringResolved(nil, entry("x", fp, plexus.TransportPortal, rd), nil, nil); ok {
		t.Error("Covering(nil scopes) = true")
	}
}

func TestSynthesizeMembers(t *testing.T) {
	wf := plexus.Entry{ID: "cc.run", Kind: plexus.KindWorkflow, Grants: verbs(ex), Transport: plexus.TransportWorkflow,
		Members: []plexus.WorkflowMember{
			{ID: "cc.board.create", Verbs: verbs(wr)},
			{ID: "cc.agent.dispatch", Verbs: verbs(ex)},
			{ID: "cc.board.status", Verbs: verbs(rd)},
			{ID: "cc.board.create", Verbs: verbs(rd)},
			{ID: "cc.run", Verbs: verbs(ex)},
			{ID: "cc.notes"},
		}}
	want := []plexus.TokenScope{
		{ID: "cc.board.create", Verbs: verbs(rd, wr), SynthesizedFor: "cc.run"},
		{ID: "cc.agent.dispatch", Verbs: verbs(ex), SynthesizedFor: "cc.run"},
		{ID: "cc.board.status", Verbs: verbs(rd), SynthesizedFor: "cc.run"},
		{ID: "cc.notes", Verbs: verbs(rd), SynthesizedFor: "cc.run"},
	}
	if diff := cmp.Diff(want, SynthesizeMembers(wf)); diff != "" {
		t.Errorf("SynthesizeMembers (-want +got):\n%s", diff)
	}
	if got := SynthesizeMembers(entry("x", fp, plexus.TransportPortal, rd)); got != nil {
		t.Errorf("SynthesizeMembers(capability) = %v, want nil", got)
	}
}
