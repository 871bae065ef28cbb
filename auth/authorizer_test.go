package auth

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/plexus-gw/plexus"
)

func entry(id string, prov plexus.Provenance, transport plexus.TransportKind, grants ...plexus.Verb) plexus.Entry {
	return plexus.Entry{ID: id, Source: "src", Kind: plexus.KindCapability, Label: id, Grants: grants, Transport: transport, Provenance: prov}
}

func TestUserConfirmAuthorizer(t *testing.T) {
	notes := entry("portal.notes.read", fp, plexus.TransportPortal, rd)
	notesW := entry("portal.notes.write", fp, plexus.TransportPortal, wr)
	mgdRead := entry("mcp.fs.read", mgd, plexus.TransportMCP, rd)
	extRead := entry("obsidian.vault.read", ext, plexus.TransportLocalREST, rd)
	noProv := entry("mystery.read", "", plexus.TransportMCP, rd)
	run := entry("cc.run", fp, plexus.TransportWorkflow, ex)

	allowD := func(e plexus.Entry, vs []plexus.Verb, s plexus.Sensitivity, w plexus.TrustWindow, prov plexus.Provenance) plexus.AuthorizationDecision {
		return plexus.AuthorizationDecision{ID: e.ID, Outcome: plexus.OutcomeAllow, Verbs: vs, Provenance: prov, Sensitivity: s, RecommendedTrustWindow: w}
	}
	pendD := func(e plexus.Entry, vs []plexus.Verb, s plexus.Sensitivity, w plexus.TrustWindow, prov plexus.Provenance) plexus.AuthorizationDecision {
		d := allowD(e, vs, s, w, prov)
		d.Outcome = plexus.OutcomePending
		return d
	}
	low, elev, high := plexus.SensitivityLow, plexus.SensitivityElevated, plexus.SensitivityHigh

	tests := []struct {
		name string
		ac   plexus.AuthorizationContext
		want plexus.AuthorizationDecision
	}{
		{"FirstPartyReadAllows",
			plexus.AuthorizationContext{AgentID: "a", Entry: notes, RequestedVerbs: verbs(rd)},
			allowD(notes, verbs(rd), low, w7d, fp)},
		{"BareAllowIsRead",
			plexus.AuthorizationContext{AgentID: "a", Entry: notes},
			allowD(notes, verbs(rd), low, w7d, fp)},
		{"ManagedReadAllows",
			plexus.AuthorizationContext{AgentID: "a", Entry: mgdRead, RequestedVerbs: verbs(rd)},
			allowD(mgdRead, verbs(rd), low, w7d, mgd)},
		{"TombstonePends",
			plexus.AuthorizationContext{AgentID: "a", Entry: notes, RequestedVerbs: verbs(rd), RevokedTombstone: true},
			pendD(notes, verbs(rd), low, w7d, fp)},
		{"TombstoneBeatsPriorApproval",
			plexus.AuthorizationContext{AgentID: "a", Entry: notesW, RequestedVerbs: verbs(wr), RevokedTombstone: true, HasPriorApproval: true},
			pendD(notesW, verbs(wr), elev, w1d, fp)},
		{"WritePends",
			plexus.AuthorizationContext{AgentID: "a", Entry: notesW, RequestedVerbs: verbs(wr)},
			pendD(notesW, verbs(wr), elev, w1d, fp)},
		{"ReadWritePends",
			plexus.AuthorizationContext{AgentID: "a", Entry: notesW, RequestedVerbs: verbs(wr, rd, wr)},
			pendD(notesW, verbs(rd, wr), elev, w1d, fp)},
		{"ExtensionReadPends",
			plexus.AuthorizationContext{AgentID: "a", Entry: extRead, RequestedVerbs: verbs(rd)},
			pendD(extRead, verbs(rd), elev, w1d, ext)},
		{"OmittedProvenanceIsExtension",
			plexus.AuthorizationContext{AgentID: "a", Entry: noProv, RequestedVerbs: verbs(rd)},
			pendD(noProv, verbs(rd), elev, w1d, ext)},
		{"ExecutePends",
			plexus.AuthorizationContext{AgentID: "a", Entry: run, RequestedVerbs: verbs(ex)},
			pendD(run, verbs(ex), elev, once, fp)},
		{"PriorApprovalAllowsWrite",
			plexus.AuthorizationContext{AgentID: "a", Entry: notesW, RequestedVerbs: verbs(wr), HasPriorApproval: true},
			allowD(notesW, verbs(wr), elev, w1d, fp)},
		{"PriorApprovalAllowsExtension",
			plexus.AuthorizationContext{AgentID: "a", Entry: extRead, RequestedVerbs: verbs(rd), HasPriorApproval: true},
			allowD(extRead, verbs(rd), elev, w1d, ext)},
		{"PriorApprovalNeverCoversExecute",
			plexus.AuthorizationContext{AgentID: "a", Entry: run, RequestedVerbs: verbs(ex), HasPriorApproval: true},
			pendD(run, verbs(ex), elev, once, fp)},
		{"AnonymousFirstPartyReadAllows",
			plexus.AuthorizationContext{Anonymous: true, Entry: notes, RequestedVerbs: verbs(rd)},
			allowD(notes, verbs(rd), low, w7d, fp)},
		{"AnonymousWritePendsDespitePrior",
			plexus.AuthorizationContext{Anonymous: true, Entry: notesW, RequestedVerbs: verbs(wr), HasPriorApproval: true},
			pendD(notesW, verbs(wr), elev, w1d, fp)},
		{"AnonymousExtensionReadPends",
			plexus.AuthorizationContext{Anonymous: true, Entry: extRead, RequestedVerbs: verbs(rd), HasPriorApproval: true},
			pendD(extRead, verbs(rd), elev, w1d, ext)},
		{"AnonymousTombstonePends",
			plexus.AuthorizationContext{Anonymous: true, Entry: notes, RequestedVerbs: verbs(rd), RevokedTombstone: true},
			pendD(notes, verbs(rd), low, w7d, fp)},
		{"ExtensionWriteHigh",
			plexus.AuthorizationContext{AgentID: "a", Entry: entry("x.w", ext, plexus.TransportMCP, wr), RequestedVerbs: verbs(wr)},
			pendD(entry("x.w", ext, plexus.TransportMCP, wr), verbs(wr), high, w1d, ext)},
		{"UnknownVerbDenied",
			plexus.AuthorizationContext{AgentID: "a", Entry: notes, RequestedVerbs: verbs(rd, "admin")},
			plexus.AuthorizationDecision{ID: notes.ID, Outcome: plexus.OutcomeDeny, Provenance: fp, Sensitivity: low, RecommendedTrustWindow: w7d}},
	}
	ignoreReason := cmpopts.IgnoreFields(plexus.AuthorizationDecision{}, "Reason")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := UserConfirmAuthorizer{}.Authorize(context.Background(), tt.ac)
			if diff := cmp.Diff(tt.want, got, ignoreReason); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s", diff)
			}
			if got.Reason == "" {
				t.Error("decision has no reason")
			}
		})
	}
	if got := (UserConfirmAuthorizer{}).Policy(); got != "user-confirm" {
		t.Errorf("Policy() = %q", got)
	}
}
