package inbox

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

const signInURL = "https://github.com/login/oauth/authorize?client_id=Iv1.abc&code_challenge=E9Mel&code_challenge_method=S256&resource=https%3A%2F%2Fapi.githubcopilot.com%2Fmcp%2F&state=opaque123"

// signInFixture is GitHub's MCP server asking to be signed in to, its
// reason carrying markdown that must stay text.
func signInFixture() plexus.Pending {
	return plexus.Pending{
		ID: pendID, Kind: plexus.PendingSignIn, State: plexus.StatePending, CreatedAt: t0, ExpiresAt: t0.Add(30 * 24 * time.Hour),
		TraceID: traceID, Items: []plexus.PendingItem{},
		SignIn: &plexus.SignInDecision{SignInRequest: plexus.SignInRequest{Server: "github", Resource: "https://api.githubcopilot.com/mcp/",
			Issuer: "https://github.com/login/oauth", Scopes: []string{"read:org", "repo"}, Reason: "the server answered 401 <img src=x> [click](http://evil)"}},
		Narration: []plexus.PendingNarration{{ID: "mcp:github", Summary: "The MCP server github, one of your own sources, asks Plexus to sign in to it."}},
	}
}

func signInWideningFixture() plexus.Pending {
	p := signInFixture()
	p.SignIn.Widening = []string{"admin:org", "delete_repo"}
	return p
}

func approvedSignInFixture() plexus.Pending {
	p := signInFixture()
	p.State, p.DecidedAt, p.DecidedBy, p.Via = plexus.StateApproved, &decided, "owner@example.com", plexus.ViaFile
	p.SignIn.AuthURL = signInURL
	return p
}

func failedSignInFixture() plexus.Pending {
	p := approvedSignInFixture()
	p.SignIn.AuthURL, p.SignIn.StartError = "", "start the sign-in to github: the authorization server offers no PKCE S256"
	return p
}

// TestRenderSignIn: the file names the server, the exact resource, the
// issuer and each scope; says no agent asked; sets a widening's scopes
// apart; shows the approved sign-in's URL as a link the owner can open
// (and, once it failed, why and the command that retries); the server's
// reason stays text.
func TestRenderSignIn(t *testing.T) {
	tests := []struct {
		name   string
		p      plexus.Pending
		want   []string
		absent []string
	}{
		{name: "Pending", p: signInFixture(),
			want: []string{"type: signin", "server: github", "resource: https://api.githubcopilot.com/mcp/", "issuer: https://github.com/login/oauth",
				"scopes: ['read:org', repo]", "# `github` asks you to sign in to it", "## Who asks", "No agent asked for this",
				"exactly `https://api.githubcopilot.com/mcp/`", "`read:org`, `repo`", `\<img src=x> \[click\](http://evil)`},
			absent: []string{"### A widening", "## The agent says", " <img", "authorization_url"}},
		{name: "Widening", p: signInWideningFixture(),
			want: []string{"widening: ['admin:org', delete_repo]", "### A widening", "- `admin:org`", "- `delete_repo`", "more scopes"}},
		{name: "Approved", p: approvedSignInFixture(),
			want: []string{"authorization_url: " + signInURL, "## Finish signing in", "<" + signInURL + ">", "`plexus mcp login github`",
				"`plexus mcp logout github`"},
			absent: []string{"## How to decide", "## Revoking"}},
		{name: "Failed", p: failedSignInFixture(),
			want:   []string{"could not start: start the sign-in to github: the authorization server offers no PKCE S256", "`plexus mcp login github`"},
			absent: []string{"authorization_url", "/authorize"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(tc.p, RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(b, []byte(w)) {
					t.Errorf("file lacks %q:\n%s", w, b)
				}
			}
			for _, a := range tc.absent {
				if bytes.Contains(b, []byte(a)) {
					t.Errorf("file holds %q:\n%s", a, b)
				}
			}
		})
	}
}

// TestLinkOrCode: only a URL whose every character an autolink keeps
// becomes a link; anything else is shown as code, never as markdown.
func TestLinkOrCode(t *testing.T) {
	tests := []struct{ in, want string }{
		{signInURL, "<" + signInURL + ">"},
		{"https://a.example/x>y", "`https://a.example/x>y`"},
		{"https://a.example/ x", "`https://a.example/ x`"},
		{"javascript:alert(1)", "`javascript:alert(1)`"},
		{"https://a.example/\u202ex", "`https://a.example/\\u{202e}x`"},
	}
	for _, tc := range tests {
		if got := linkOrCode(tc.in); got != tc.want {
			t.Errorf("linkOrCode(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseSignIn: a rendered sign-in file reads back as its decision
// (the signin block is Plexus's, not an owner's note), an unchanged or
// reason-only edit approves it as a whole, and a file claiming another
// type or an agent is forged.
func TestParseSignIn(t *testing.T) {
	p := signInFixture()
	b, err := Render(p, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != p.ID || f.Type != plexus.PendingSignIn || f.Agent != "" || len(f.Notes.nodes) != 0 {
		t.Fatalf("parsed %+v; want the sign-in decision with no owner notes", f)
	}
	edited := bytes.Replace(b, []byte("reason: \"\""), []byte("reason: my own account"), 1)
	f, err = Parse(edited)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Changes(p, f)
	if err != nil || n.Narrowed() || n.Reason != "my own account" {
		t.Errorf("Changes = %+v, %v; want the whole request with the owner's reason", n, err)
	}
	for _, forge := range []struct{ old, new string }{{"type: signin", "type: grant"}, {"agent: \"\"", "agent: claude"}} {
		f, err := Parse(bytes.Replace(b, []byte(forge.old), []byte(forge.new), 1))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Changes(p, f)
		var we *WideningError
		if !errors.As(err, &we) || !we.Forged() {
			t.Errorf("%s: Changes = %v; want a forged file", forge.new, err)
		}
	}
}

// TestTermSignIn: plexus show, the pending table and approve's answer
// name the server and its scopes, mark a widening, and show the page to
// open once approved.
func TestTermSignIn(t *testing.T) {
	var show bytes.Buffer
	WritePending(&show, signInWideningFixture())
	for _, w := range []string{"asks you to sign in to it", "No agent asked", "https://api.githubcopilot.com/mcp/", "WIDENING  admin:org delete_repo",
		"plexus approve " + pendID + " | plexus reject"} {
		if !strings.Contains(show.String(), w) {
			t.Errorf("plexus show lacks %q:\n%s", w, show.String())
		}
	}
	var table bytes.Buffer
	if err := WritePendingTable(&table, []plexus.Pending{signInWideningFixture()}, "inbox/"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "sign in to github (read:org repo), WIDENING: admin:org delete_repo") {
		t.Errorf("plexus pending:\n%s", table.String())
	}
	var approved bytes.Buffer
	WriteDecided(&approved, approvedSignInFixture(), "owner@example.com", "active/x.md")
	if got := approved.String(); !strings.Contains(got, signInURL) || strings.Contains(got, "grant_resolved") {
		t.Errorf("plexus approve said:\n%s", got)
	}
	var denied bytes.Buffer
	p := signInFixture()
	p.State, p.Reason = plexus.StateDenied, "not now"
	WriteDecided(&denied, p, "owner@example.com", "rejected/x.md")
	if got := denied.String(); !strings.Contains(got, "still needs sign-in") || strings.Contains(got, "agent") {
		t.Errorf("plexus reject said:\n%s", got)
	}
}
