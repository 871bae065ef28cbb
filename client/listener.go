package client

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/plexus-gw/plexus/platform"
)

// ForeignListenerError says the socket listening at the gateway's address
// belongs to another user of the machine, so the admin client sent nothing
// (the connection-key above all) over the connection. The port may have been
// left free by a daemon that stopped, and taken by someone else.
type ForeignListenerError struct {
	Addr string // the address dialed
	UID  int    // the listener's owner
	Want int    // this process's user
}

func (e *ForeignListenerError) Error() string {
	return fmt.Sprintf("the listener at %s belongs to uid %d, not to you (uid %d): not sending the connection-key to it. "+
		"Plexus may have stopped and another user taken the port; start it with: plexus serve", e.Addr, e.UID, e.Want)
}

// ownListener makes the client refuse a gateway whose listening socket
// another user owns (an [Admin] sends the owner's connection-key).
func ownListener() Option { return func(c *config) { c.ownListener = true } }

// ownerDialer dials like d, then checks in the kernel's socket tables that
// the socket listening at the address belongs to uid. Where the tables
// cannot say (no /proc), it lets the connection through: see
// docs/threat-model.md. The check follows the dial, so the socket checked is
// the one that took this connection.
type ownerDialer struct {
	d   *net.Dialer
	uid int
}

func (o ownerDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := o.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := o.check(c, addr); err != nil {
		if cerr := c.Close(); cerr != nil {
			return nil, fmt.Errorf("%w (closing: %v)", err, cerr)
		}
		return nil, err
	}
	return c, nil
}

func (o ownerDialer) check(c net.Conn, addr string) error {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	for _, uid := range platform.ListenerUIDs(ta.AddrPort()) {
		if uid != o.uid {
			return &ForeignListenerError{Addr: addr, UID: uid, Want: o.uid}
		}
	}
	return nil
}

// dialer is the dial function of the default transport.
func (c *config) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	if c.ownListener {
		return ownerDialer{d: d, uid: os.Getuid()}.DialContext
	}
	return d.DialContext
}
