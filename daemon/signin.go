package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/plexus-gw/plexus"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/mcphost"
	"github.com/plexus-gw/plexus/oauth"
)

// loginTTL is how long a started sign-in waits for its redirect: the
// oauth package's state lives that long.
const loginTTL = 10 * time.Minute

// loginWait bounds one POST …/login/wait: under the client's request
// timeout, after which the CLI asks again.
const loginWait = 20 * time.Second

// signIns wires the OAuth client (oauth.Manager) to the MCP servers'
// manager, the admin endpoints and the journal. It implements
// [mcphost.SignIns] and [plexushttp.SignInAPI].
//
// logins is guarded by mu; a login's outcome is written once (under its
// once) by whichever waiter receives the flow's Done first, and read by
// the others after ended closes.
type signIns struct {
	oauth *oauth.Manager
	mcp   func() *mcphost.Manager // d.mcp, built after the OAuth client
	now   func() time.Time
	log   *slog.Logger

	// tokens tells whether a server has a stored sign-in (the secret
	// oauth.<server>), which a logout of a server no longer running
	// still revokes.
	tokens func(server string) bool
	// withdraw withdraws the sign-in request waiting in the inbox for a
	// server (d.withdrawSignIn).
	withdraw func(ctx context.Context, server, why string)

	mu     sync.Mutex
	logins map[string]*login // by server: the latest login started
}

// login is one started sign-in.
type login struct {
	flow    *oauth.Flow
	expires time.Time
	once    sync.Once
	ended   chan struct{}
	err     error // set before ended closes
}

var (
	_ mcphost.SignIns      = (*signIns)(nil)
	_ plexushttp.SignInAPI = (*signIns)(nil)
)

// newSignIns builds the OAuth client on the platform's secrets, sealed
// under PLEXUS_HOME/token-key, its redirect coming back to the bound
// listener.
func (d *Daemon) newSignIns(o Options) {
	now := o.Clock
	if now == nil {
		now = time.Now
	}
	port := strconv.Itoa(d.ln.Addr().(*net.TCPAddr).Port)
	d.signIn = &signIns{now: now, log: d.log, logins: map[string]*login{}, mcp: func() *mcphost.Manager { return d.mcp },
		withdraw: d.withdrawSignIn,
		tokens:   func(server string) bool { _, err := d.plat.Secret(oauth.SecretName(server)); return err == nil }}
	d.signIn.oauth = oauth.New(oauth.Options{
		Store:    d.plat,
		TokenKey: d.home.TokenKey,
		Now:      o.Clock,
		CallbackURL: func(p int) string {
			if p == 0 {
				return "http://127.0.0.1:" + port + "/oauth/callback"
			}
			return "http://127.0.0.1:" + strconv.Itoa(p) + "/oauth/callback"
		},
		NeedsSignIn: d.requestSignIn,
		SignedIn: func(server string) {
			if m := d.mcp; m != nil {
				m.SignedIn(server)
			}
			// Signed in another way (plexus mcp login) while a request
			// waited in the inbox: it asks for nothing any more.
			d.withdrawSignIn(context.Background(), server, "signed in meanwhile (plexus mcp login)")
		},
		Journal: func(ctx context.Context, action, server string, payload map[string]any) {
			d.gw.Note(ctx, action, "mcp:"+server, "", payload)
		},
		Logger: d.log,
	})
}

// requestSignIn puts a server's need for sign-in up for the owner: the
// gateway's sign-in decision, a file in inbox/ (approving it calls
// d.signIn's StartSignIn, gateway.Deps.SignIn). It runs on the goroutine
// of the request that found the server wants a sign-in; the source's
// health and the calls' answers name the command whatever happens here.
func (d *Daemon) requestSignIn(req plexus.SignInRequest) {
	if _, err := d.gw.RequestSignIn(context.Background(), req); err != nil {
		d.log.Error("put up an MCP server's sign-in request", "server", req.Server, "err", err, "fix", "plexus mcp login "+req.Server)
	}
}

// withdrawSignIn withdraws the sign-in request waiting for server, if any.
func (d *Daemon) withdrawSignIn(ctx context.Context, server, why string) {
	if err := d.gw.WithdrawSignIn(ctx, server, why); err != nil {
		d.log.Error("withdraw an MCP server's sign-in request", "server", server, "err", err)
	}
}

// Handler is the OAuth handler of server's client.
func (s *signIns) Handler(server, serverURL string, c mcphost.SignInConfig) auth.OAuthHandler {
	return s.oauth.Handler(server, serverURL, oauth.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, PrivateKey: c.PrivateKey,
		CallbackPort: c.CallbackPort, AuthServerMetadataURL: c.AuthServerMetadataURL, ClientMetadataURL: c.ClientMetadataURL,
		Scopes: c.Scopes, Grant: c.Grant})
}

// Needed reports whether err says the owner must sign in.
func (*signIns) Needed(err error) bool { return errors.Is(err, oauth.ErrNeedsSignIn) }

// Forget signs out of a server that left mcp.json.
func (s *signIns) Forget(ctx context.Context, server string) {
	s.withdraw(ctx, server, "the server was removed from mcp.json")
	if err := s.oauth.Logout(ctx, server); err != nil {
		s.log.Warn("sign out of a removed MCP server", "server", server, "err", err)
	}
}

// known refuses a server that does not run with a sign-in.
func (s *signIns) known(server string) error {
	if m := s.mcp(); m == nil || !m.SignsIn(server) {
		return plexus.Errorf(plexus.CodeNotFound, "no running MCP server %q signs in with OAuth (a url server in mcp.json without its own Authorization header; see plexus mcp list)", server)
	}
	return nil
}

// StartLogin begins the owner's sign-in to server; a login started
// before for it is replaced (its state stops working in the oauth client).
func (s *signIns) StartLogin(ctx context.Context, server string) (plexus.MCPLoginResponse, error) {
	return s.startLogin(ctx, server)
}

func (s *signIns) startLogin(ctx context.Context, server string, opts ...oauth.LoginOption) (plexus.MCPLoginResponse, error) {
	if err := s.known(server); err != nil {
		return plexus.MCPLoginResponse{}, err
	}
	flow, err := s.oauth.Login(ctx, server, opts...)
	if err != nil {
		return plexus.MCPLoginResponse{}, plexus.WrapError(plexus.CodeSourceUnavailable, err, fmt.Sprintf("start the sign-in to %s: %v", server, err))
	}
	l := &login{flow: flow, expires: s.now().Add(loginTTL), ended: make(chan struct{})}
	s.mu.Lock()
	s.logins[server] = l
	s.mu.Unlock()
	return plexus.MCPLoginResponse{Server: server, URL: flow.URL, ExpiresAt: l.expires}, nil
}

// WaitLogin waits at most loginWait for the latest sign-in to server.
func (s *signIns) WaitLogin(ctx context.Context, server string) (plexus.MCPLoginStatus, error) {
	s.mu.Lock()
	l := s.logins[server]
	s.mu.Unlock()
	if l == nil {
		return plexus.MCPLoginStatus{}, plexus.Errorf(plexus.CodeNotFound, "no sign-in to %s was started; run plexus mcp login %s", server, server)
	}
	t := time.NewTimer(loginWait)
	defer t.Stop()
	select {
	case err := <-l.flow.Done:
		l.end(err)
	case <-l.ended:
	case <-t.C:
		return plexus.MCPLoginStatus{Server: server, State: plexus.MCPLoginWaiting}, nil
	case <-ctx.Done():
		return plexus.MCPLoginStatus{}, ctx.Err()
	}
	<-l.ended
	if l.err != nil {
		return plexus.MCPLoginStatus{Server: server, State: plexus.MCPLoginFailed, Error: l.err.Error()}, nil
	}
	return plexus.MCPLoginStatus{Server: server, State: plexus.MCPLoginSignedIn}, nil
}

// end records the login's outcome once.
func (l *login) end(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.ended)
	})
}

// Logout revokes and deletes server's tokens; its client drops its
// session and waits for a new sign-in.
func (s *signIns) Logout(ctx context.Context, server string) (plexus.MCPLogoutResponse, error) {
	if err := s.known(server); err != nil && !s.tokens(server) {
		return plexus.MCPLogoutResponse{}, err
	}
	if err := s.oauth.Logout(ctx, server); err != nil {
		return plexus.MCPLogoutResponse{}, plexus.WrapError(plexus.CodeSourceUnavailable, err, fmt.Sprintf("sign out of %s: %v", server, err))
	}
	if m := s.mcp(); m != nil {
		m.SignedOut(server)
	}
	return plexus.MCPLogoutResponse{Server: server}, nil
}

// StartSignIn starts the sign-in the owner approved in the inbox (the
// gateway's sign-in decision), bound to that request: its issuer, its
// resource, its scopes. It answers the URL to open; the source connects
// when the redirect comes back, with no one waiting here.
func (s *signIns) StartSignIn(ctx context.Context, req plexus.SignInRequest) (string, error) {
	resp, err := s.startLogin(ctx, req.Server, oauth.Approved(req))
	return resp.URL, err
}
