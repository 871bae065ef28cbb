package inbox

import (
	"fmt"
	"io"
	"strings"

	"github.com/plexus-gw/plexus"
)

// A sign-in request: a remote MCP server of the owner's wants Plexus to
// sign in to it (OAuth). No agent asked for it, and the file says so;
// approving it starts the sign-in, and the file then shows the page the
// owner opens to finish it.

// fmSignIn is a sign-in request as the owner reads it in the frontmatter.
// Plexus's own: the journal's copy is what approving starts.
type fmSignIn struct {
	Server   string   `yaml:"server"`
	Resource string   `yaml:"resource"`
	Issuer   string   `yaml:"issuer"`
	Scopes   []string `yaml:"scopes,flow"`
	Widening []string `yaml:"widening,omitempty,flow"`
	AuthURL  string   `yaml:"authorization_url,omitempty"`
}

func signInOf(s plexus.SignInDecision) *fmSignIn {
	return &fmSignIn{Server: exact(s.Server), Resource: exact(s.Resource), Issuer: exact(s.Issuer),
		Scopes: nonNilStrings(exacts(s.Scopes)), Widening: exacts(s.Widening), AuthURL: exact(s.AuthURL)}
}

func nonNilStrings(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// signInTitle is a sign-in request's heading.
func signInTitle(s plexus.SignInDecision) string {
	if len(s.Widening) > 0 {
		return code(s.Server) + " asks to sign in again with more scopes"
	}
	return code(s.Server) + " asks you to sign in to it"
}

// signInOrigin stands where an agent's request quotes the agent: nobody
// but the owner's own source asked.
func (w body) signInOrigin(s plexus.SignInDecision) {
	w.para("## Who asks", "", "No agent asked for this. "+code(s.Server)+" is your own source (its entry in `mcp.json`): "+
		"Plexus asks on its behalf because the server wants a signed-in client, and no agent can see, approve or "+
		"finish this sign-in.")
}

// signIn writes what approving a sign-in request does: the server, the
// exact resource the tokens are for, the authorization server and the
// scopes, a widening's added scopes set apart.
func (w body) signIn(s plexus.SignInDecision) {
	issuer := "not discovered yet (approving starts no sign-in then: Plexus files a new request naming the one it finds)"
	if s.Issuer != "" {
		issuer = codeExact(s.Issuer)
	}
	scopes := "none named (the authorization server's default)"
	if len(s.Scopes) > 0 {
		scopes = codesExact(s.Scopes)
	}
	w.para("Approving starts signing Plexus in to the MCP server "+code(s.Server)+" (source "+code("mcp:"+s.Server)+"):", "",
		"- the tokens are issued for exactly "+codeExact(s.Resource)+", and are sent to nothing else;",
		"- the authorization server (issuer) is "+issuer+";",
		"- the scopes asked are "+scopes+", and `offline_access` where the server offers it (for a refresh token).", "",
		"A sign-in at another authorization server, for another resource or asking for more does not start: "+
			"Plexus files a new request showing what it found.", "",
		"You finish the sign-in in your browser. The tokens are kept with your secrets (`plexus secrets`): a file in "+
			"Plexus's home only your user can read (mode 0600), not encrypted. No agent ever sees them, "+
			"and calling the server's entries still needs each agent's grant.")
	if len(s.Widening) > 0 {
		lines := []string{"### A widening", "", "The server asks for more than you approved before (a step-up). Approving grants these scopes too:", ""}
		for _, sc := range s.Widening {
			lines = append(lines, "- "+codeExact(sc))
		}
		w.para(lines...)
	}
	if s.Reason != "" {
		w.para("Why now: " + md(oneLine(s.Reason)) + ".")
	}
}

// signInStarted writes, for an approved sign-in, the page the owner opens
// to finish it, or why it could not start.
func (w body) signInStarted(s plexus.SignInDecision) {
	login := code("plexus mcp login " + s.Server)
	switch {
	case s.AuthURL != "":
		w.para("## Finish signing in", "", "Open this page in your browser and sign in; it serves one sign-in, for ten minutes:", "",
			linkOrCode(s.AuthURL), "", "If it has expired, run "+login+": it starts the same sign-in anew.")
	case s.StartError != "":
		w.para("## Finish signing in", "", "The sign-in could not start: "+md(oneLine(s.StartError))+".", "",
			"The server still needs sign-in. Run "+login+" to try again.")
	default:
		w.para("## Finish signing in", "", "The sign-in is starting; this file shows the page to open once it has. "+
			"If it does not, run "+login+".")
	}
	w.para("## Signing out", "", "This approval leaves nothing standing to revoke here: to sign out of "+code(s.Server)+
		" and delete its tokens, run "+code("plexus mcp logout "+s.Server)+". You may move this file to `../archive/` once done.")
}

// linkOrCode is u as an autolink the owner can click, when u holds only
// characters an autolink keeps as they are (the gateway keeps only such
// URLs); else as code, never as markdown.
func linkOrCode(u string) string {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return codeExact(u)
	}
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '`' || c == '"' || c == '\\' {
			return codeExact(u)
		}
	}
	return "<" + u + ">"
}

func codesExact(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = codeExact(s)
	}
	return strings.Join(out, ", ")
}

// writeSignIn prints a sign-in request for a terminal (plexus show).
func writeSignIn(w io.Writer, s plexus.SignInDecision) {
	fmt.Fprintf(w, "\n  No agent asked: %q is your own source (mcp.json).\n", s.Server)
	fmt.Fprintf(w, "  resource  %s\n", TermSafe(s.Resource))
	fmt.Fprintf(w, "  issuer    %s\n", TermSafe(dash(s.Issuer)))
	fmt.Fprintf(w, "  scopes    %s\n", TermSafe(dash(strings.Join(s.Scopes, " "))))
	if len(s.Widening) > 0 {
		fmt.Fprintf(w, "  WIDENING  %s (more than you approved before)\n", TermSafe(strings.Join(s.Widening, " ")))
	}
	if s.Reason != "" {
		fmt.Fprintf(w, "  why now   %s\n", TermSafe(s.Reason))
	}
	writeSignInStarted(w, s)
}

// writeSignInStarted prints how an approved sign-in's start went.
func writeSignInStarted(w io.Writer, s plexus.SignInDecision) {
	switch {
	case s.AuthURL != "":
		fmt.Fprintf(w, "\nOpen this page to finish signing in (one use, ten minutes):\n  %s\n", TermSafe(s.AuthURL))
	case s.StartError != "":
		fmt.Fprintf(w, "\nThe sign-in could not start: %s\nRun: plexus mcp login %s\n", TermSafe(s.StartError), TermSafe(s.Server))
	}
}

// signInAsks is a sign-in request's row in the pending table.
func signInAsks(s plexus.SignInDecision) string {
	out := "sign in to " + s.Server
	if len(s.Scopes) > 0 {
		out += " (" + strings.Join(s.Scopes, " ") + ")"
	}
	if len(s.Widening) > 0 {
		out += ", WIDENING: " + strings.Join(s.Widening, " ")
	}
	return out
}
