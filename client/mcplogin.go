package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/plexus-gw/plexus"
)

// StartMCPLogin begins the owner's sign-in to the MCP server name and
// returns the URL to open (`plexus mcp login`).
func (a *Admin) StartMCPLogin(ctx context.Context, name string) (plexus.MCPLoginResponse, error) {
	var resp plexus.MCPLoginResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/mcp/"+url.PathEscape(name)+"/login", nil, &resp)
	return resp, err
}

// WaitMCPLogin waits for the sign-in to name to end: it asks the gateway
// (which holds each request a while) until the state is not waiting, ctx
// ends or deadline passes; it answers the last state.
func (a *Admin) WaitMCPLogin(ctx context.Context, name string, deadline time.Time) (plexus.MCPLoginStatus, error) {
	for {
		var st plexus.MCPLoginStatus
		if err := a.do(ctx, http.MethodPost, "/admin/api/mcp/"+url.PathEscape(name)+"/login/wait", nil, &st); err != nil {
			return st, err
		}
		if st.State != plexus.MCPLoginWaiting {
			return st, nil
		}
		if !time.Now().Before(deadline) {
			return st, fmt.Errorf("the sign-in to %s did not end by %s", name, deadline.Format(time.TimeOnly))
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// LogoutMCP revokes and deletes the tokens of the MCP server name.
func (a *Admin) LogoutMCP(ctx context.Context, name string) (plexus.MCPLogoutResponse, error) {
	var resp plexus.MCPLogoutResponse
	err := a.do(ctx, http.MethodPost, "/admin/api/mcp/"+url.PathEscape(name)+"/logout", nil, &resp)
	return resp, err
}
