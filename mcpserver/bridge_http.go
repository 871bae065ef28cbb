package mcpserver

import (
	"errors"
	"net/http"
)

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

// errRedirected is the endpoint answering a request of the bridge's with
// a redirect, which the bridge does not follow.
var errRedirected = errors.New("the endpoint answered with a redirect")

// bridgeClient is the HTTP client of the bridge's requests to the daemon
// over rt, which follows no redirect: rt puts the agent's PAT on every
// request it carries, a redirected one too, and the PAT (and the call's
// arguments) go to the endpoint and nowhere else.
func bridgeClient(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errRedirected
	}}
}
