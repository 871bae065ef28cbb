package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ProtectRedirects returns a copy of c whose redirects never carry a
// token to another origin. net/http keeps the Authorization header on a
// redirect to the same host name (any port, any scheme) and to its
// subdomains; an MCP server's token is for its own origin only (scheme,
// host and port), so the header is dropped when a redirect leaves it, and
// a redirect from https to http is refused. The source's transport and the
// Manager use such a client. c's own CheckRedirect, if any, still runs.
func ProtectRedirects(c *http.Client) *http.Client {
	out := *c
	next := c.CheckRedirect
	out.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		prev := via[len(via)-1]
		if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect from %s to plain http refused", prev.URL.Host)
		}
		if origin(req) != origin(via[0]) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &out
}

func origin(r *http.Request) string {
	host := strings.ToLower(r.URL.Hostname())
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
	}
	return r.URL.Scheme + "://" + host + ":" + port
}
