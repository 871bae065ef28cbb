package mcpserver

import "net/http"

// bridgeIdleConns is how many idle connections to the daemon the bridge
// keeps: as many as a host's concurrent calls, so that calls in parallel
// reuse their connections rather than open new ones (net/http keeps two
// by default).
const bridgeIdleConns = 16

// bridgeTransport is the HTTP transport of one connection to the daemon.
// Its idle connections close when the daemon closes them, or after
// net/http's idle timeout once the bridge stopped using them.
func bridgeTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // loopback, and the request bears the PAT
	t.MaxIdleConnsPerHost = bridgeIdleConns
	return t
}
