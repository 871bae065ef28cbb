package plexus

import "time"

// The owner's sign-in to a remote MCP server (OAuth), on the admin wire:
// `plexus mcp login` starts it and waits for it, `plexus mcp logout` ends
// it. None of these carries a token, a code or a client secret.

// MCPLoginResponse answers POST /admin/api/mcp/{server}/login: the URL the
// owner opens to sign in. The redirect comes back to the gateway, which
// takes it until ExpiresAt.
type MCPLoginResponse struct {
	Server    string    `json:"server"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// The states of a sign-in in [MCPLoginStatus].
const (
	MCPLoginWaiting  = "waiting"   // the redirect has not come back yet
	MCPLoginSignedIn = "signed_in" // the tokens are stored; the source connects
	MCPLoginFailed   = "failed"    // Error says why
)

// MCPLoginStatus answers POST /admin/api/mcp/{server}/login/wait, which
// holds the request until the sign-in ends or a while passes (then State is
// waiting and the caller asks again).
type MCPLoginStatus struct {
	Server string `json:"server"`
	State  string `json:"state"`
	Error  string `json:"error,omitempty"`
}

// MCPLogoutResponse answers POST /admin/api/mcp/{server}/logout: the
// tokens were revoked where the server offers revocation, and deleted.
type MCPLogoutResponse struct {
	Server string `json:"server"`
}
