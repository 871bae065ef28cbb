package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestExpandWildcards(t *testing.T) {
	read, write, exec := plexus.VerbRead, plexus.VerbWrite, plexus.VerbExecute
	entries := []plexus.Entry{
		{ID: "mcp.conf.get", Grants: []plexus.Verb{read}},
		{ID: "mcp.conf.set", Grants: []plexus.Verb{write}},
		{ID: "mcp.conf.wipe", Grants: []plexus.Verb{exec}},
		{ID: "mcp.conf.guide", Kind: plexus.KindSkill},
		{ID: "mcp.confx.get", Grants: []plexus.Verb{read}},
		{ID: "portal.docs.read", Grants: []plexus.Verb{read}},
	}
	win := &plexus.TrustWindow{Kind: plexus.Window7d}
	tests := []struct {
		name         string
		grants       []plexus.ConnectGrant
		want         []plexus.ConnectGrant
		wantDeclined []string
		wantErr      bool
	}{
		{name: "OKReadWrite", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.conf.*", Verbs: []plexus.Verb{read, write}, TrustWindow: win}},
			want: []plexus.ConnectGrant{{CapabilityID: "mcp.conf.get", Verbs: []plexus.Verb{read}, TrustWindow: win},
				{CapabilityID: "mcp.conf.set", Verbs: []plexus.Verb{write}, TrustWindow: win}},
			wantDeclined: []string{"mcp.conf.wipe"}},
		{name: "OKBareIsRead", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.conf.*"}},
			want:         []plexus.ConnectGrant{{CapabilityID: "mcp.conf.get", Verbs: []plexus.Verb{read}}},
			wantDeclined: []string{"mcp.conf.set", "mcp.conf.wipe"}},
		{name: "OKPlainPassesThrough", grants: []plexus.ConnectGrant{{CapabilityID: "portal.docs.read"}},
			want: []plexus.ConnectGrant{{CapabilityID: "portal.docs.read"}}},
		{name: "ErrNothingGiven", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.none.*"}}, wantErr: true},
		{name: "ErrOnlyExecute", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.conf.wipe.*"}}, wantErr: true},
		{name: "ErrStarInside", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.*.get"}}, wantErr: true},
		{name: "ErrBareStar", grants: []plexus.ConnectGrant{{CapabilityID: ".*"}}, wantErr: true},
		{name: "ErrStarPrefix", grants: []plexus.ConnectGrant{{CapabilityID: "mcp.c*.*"}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, declined, err := expandWildcards(entries, tc.grants)
			if tc.wantErr {
				if err == nil || plexus.CodeOf(err) != plexus.CodeInvalidRequest {
					t.Fatalf("err = %v, want invalid_request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("grants (-want +got):\n%s", diff)
			}
			var ids []string
			for _, d := range declined {
				ids = append(ids, d.ID)
			}
			if diff := cmp.Diff(tc.wantDeclined, ids); diff != "" {
				t.Errorf("declined (-want +got):\n%s", diff)
			}
		})
	}
}
