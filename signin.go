package plexus

// SignInRequest is what the owner is asked when a remote MCP server wants
// Plexus to sign in to it (OAuth): which server, for which resource, at
// which authorization server, with which scopes. It is shared by the
// sign-in client (oauth), the decision it becomes (gateway) and the inbox
// file that shows it (inbox), none of which imports another. It never
// carries a token, a code, a client secret or a key.
type SignInRequest struct {
	// Server is the mcp.json entry's name ("github"); its source is
	// "mcp:<Server>".
	Server string `json:"server"`
	// Resource is the exact resource the tokens will be issued for (RFC
	// 8707): the server's canonical URL, or the resource its protected
	// resource metadata names.
	Resource string `json:"resource"`
	// Issuer is the authorization server's issuer, once discovered.
	Issuer string `json:"issuer,omitempty"`
	// Scopes are the scopes the sign-in will ask for.
	Scopes []string `json:"scopes,omitempty"`
	// Widening is set when the server asked for more scopes than the owner
	// approved (a step-up): the request shows the scopes it adds.
	Widening []string `json:"widening,omitempty"`
	// Reason says why sign-in is needed now ("the server answered 401",
	// "the refresh token was refused").
	Reason string `json:"reason"`
}

// SignInDecision is a [SignInRequest] put up for the owner, and what
// approving it did: the authorization URL the owner opens to finish the
// sign-in, or why the sign-in could not start. The URL carries no token,
// code or secret (the PKCE verifier and the tokens stay with the sign-in
// client); it is shown to the owner alone and never journaled.
type SignInDecision struct {
	SignInRequest
	// AuthURL is the authorization server's page the approved sign-in
	// waits at; it serves one sign-in, for a few minutes.
	AuthURL string `json:"authUrl,omitempty"`
	// StartError says why the approved sign-in could not start.
	StartError string `json:"startError,omitempty"`
}
