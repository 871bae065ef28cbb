package http

import (
	"net"
	"net/netip"

	"github.com/plexus-gw/plexus/platform"
)

// peerUID finds the user owning the client end of a loopback TCP connection
// from the kernel's socket tables ([platform.SocketUID]). It reports false
// where that is unknown, never a guess.
func peerUID(remote, local string) (int, bool) {
	r, err := netip.ParseAddrPort(remote)
	if err != nil {
		return 0, false
	}
	l, err := netip.ParseAddrPort(local)
	if err != nil {
		return 0, false
	}
	return platform.SocketUID(r, l)
}

// localAddrOf is the server end of a request's connection, as a string.
func localAddrOf(a any) string {
	if na, ok := a.(net.Addr); ok {
		return na.String()
	}
	return ""
}
