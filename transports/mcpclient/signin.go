package mcpclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/plexus-gw/plexus"
)

// SignIn is how a url server's client signs in when the server asks
// (OAuth). The handler is the SDK's: its transport asks it for the token
// of each request and calls its Authorize on a 401 or 403. When no token
// can be had without the owner, Authorize fails with an error Needed
// recognizes; the client then stops: no request goes to the server (or,
// through the handler, to its authorization server) until [Client.SignedIn]
// says the owner signed in, or the client is replaced.
type SignIn struct {
	Handler auth.OAuthHandler
	// Needed reports whether err, from a connection or a call, says the
	// owner must sign in first (the oauth package's ErrNeedsSignIn: the
	// transport cannot import it, so the daemon hands in the test).
	Needed func(error) bool
}

// errSignIn marks a failed connection that waits for the owner's sign-in.
var errSignIn = errors.New("the server needs sign-in")

// needsSignIn reports whether err says the server waits for a sign-in.
func (c *Client) needsSignIn(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errSignIn) {
		return true
	}
	si := c.opts.SignIn
	return si != nil && si.Needed != nil && si.Needed(err)
}

// LoginCommand is the command that signs Plexus in to the server name.
func LoginCommand(name string) string { return "plexus mcp login " + name }

// signInDetail is the health detail of a source waiting for its sign-in;
// a call to one of its entries answers it too.
func (c *Client) signInDetail() string {
	return fmt.Sprintf("needs sign-in: run %s", LoginCommand(c.name))
}

// SignedIn tells the client the owner signed in (or its tokens changed):
// a client waiting for it connects at once. Safe to call at any time, from
// any goroutine; it never blocks.
func (c *Client) SignedIn() {
	c.mu.RLock()
	waiting := c.health.NeedsSignIn
	c.mu.RUnlock()
	if waiting {
		// Said at once, so that whoever waits for the source after the
		// sign-in (plexus mcp login) does not read the old "needs sign-in".
		c.setHealthSignIn(plexus.HealthUnknown, "signed in; connecting", false)
	}
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// waitSignIn publishes that the source needs sign-in and waits, sending
// nothing, until [Client.SignedIn] or ctx ends; it reports whether to
// connect again.
func (c *Client) waitSignIn(ctx context.Context) bool {
	c.log.Warn("mcp: the server needs sign-in; waiting for the owner", "fix", LoginCommand(c.name))
	c.setHealthSignIn(plexus.HealthUnavailable, c.signInDetail(), true)
	select {
	case <-ctx.Done():
		return false
	case <-c.wake:
		c.log.Info("mcp: signed in; connecting")
		return true
	}
}

// drainWake forgets a wake-up that came before this attempt: the attempt
// reads the tokens as they are now.
func (c *Client) drainWake() {
	select {
	case <-c.wake:
	default:
	}
}

// lostToSignIn ends session s after a call found that the server needs
// sign-in (its tokens were revoked, or a refresh was refused): Run sees
// the session lost and waits for the owner instead of reconnecting.
func (c *Client) lostToSignIn(s *session) {
	c.signInLost.Store(true)
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil // no further call starts on it
	}
	c.mu.Unlock()
	c.setHealthSignIn(plexus.HealthUnavailable, c.signInDetail(), true)
	if err := s.cs.Close(); err != nil {
		c.log.Debug("mcp: closing a session that needs sign-in", "err", err)
	}
}

// SignedOut tells the client its tokens were revoked and deleted: a live
// session ends, and the client waits for a new sign-in. Safe to call at
// any time, from any goroutine.
func (c *Client) SignedOut() {
	c.mu.RLock()
	s := c.sess
	c.mu.RUnlock()
	if s != nil {
		c.lostToSignIn(s)
	}
}
