package http

import (
	nethttp "net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/plexus-gw/plexus"
)

// ValidHost reports whether host, a request's Host, is exactly the loopback
// authority of the bound port: 127.0.0.1:<port>, localhost:<port> or
// [::1]:<port>, compared case-insensitively.
//
// Anything else is refused, because a DNS-rebinding page reaches 127.0.0.1
// under its own hostname and the browser sends that hostname as Host: a name
// that merely resolves to loopback (127.0.0.1.nip.io), a trailing-dot alias
// (localhost.), a missing or different port (another local service's origin)
// and an empty Host all fall outside the one authority we bound.
func ValidHost(host string, port int) bool {
	if port <= 0 || port > 65535 {
		return false
	}
	// host must fold to name+port: the port's digits fold only to
	// themselves, so it must end in them exactly and fold to name before
	// them (no string is built per request).
	var digits [8]byte
	p := strconv.AppendInt(digits[:0], int64(port), 10)
	if len(host) <= len(p) || host[len(host)-len(p):] != string(p) {
		return false
	}
	rest := host[:len(host)-len(p)]
	for _, name := range [...]string{"127.0.0.1:", "localhost:", "[::1]:"} {
		if strings.EqualFold(rest, name) {
			return true
		}
	}
	return false
}

// originForm reports whether a request-target is origin-form ("/path") or
// the asterisk-form of OPTIONS, given the target as sent (RequestURI) and
// as parsed. Only then does the Host header name the authority asked for.
//
// For an absolute-form target ("GET http://127.0.0.1:7077/x HTTP/1.1")
// net/http takes the target's authority as r.Host and discards the Host
// header, as RFC 9112 §3.2.2 tells a server to: the guard cannot hold both
// to the loopback rule, and a foreign Host then went unseen. So absolute-
// and authority-form are refused whatever their authority: no client of a
// loopback gateway needs them (a proxy speaks origin-form to the origin).
func originForm(requestURI string, u *url.URL) bool {
	if u == nil || u.Host != "" || u.Scheme != "" {
		return false
	}
	return strings.HasPrefix(requestURI, "/") || requestURI == "*"
}

// canonicalOrigin returns o as scheme://host[:port] with scheme and host
// lower-cased, or false when o is not a serialized origin (a path, query,
// fragment or userinfo, or "null").
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", false
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), true
}

// allowedOrigins canonicalizes the configured origins, dropping (with a
// warning) any that is not an origin, since it could never match.
func (s *Server) allowedOrigins(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, o := range list {
		c, ok := canonicalOrigin(o)
		if !ok {
			s.log.Warn("ignoring allowed origin that is not scheme://host[:port]", "origin", o)
			continue
		}
		m[c] = true
	}
	return m
}

// guard is the outermost gate of every route, including unknown ones: the
// request-target must be origin-form (see [originForm]), the Host must be
// the bound loopback authority and a present Origin must be allowed, else
// host_forbidden before any credential is looked at.
//
// net/http's CrossOriginProtection is deliberately not layered here: it
// cannot stop rebinding (the attacker's Origin equals its own Host), and
// every request it would refuse carries an Origin this guard already
// refuses unless the owner allowed it.
func (s *Server) guard(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if !originForm(r.RequestURI, r.URL) {
			s.forbid(w, r, "the request-target must be a path on the gateway (origin-form), not an absolute URL")
			return
		}
		if !ValidHost(r.Host, s.Port()) {
			s.forbid(w, r, "the Host header must be the gateway's loopback authority")
			return
		}
		if vals, present := r.Header["Origin"]; present {
			if len(vals) != 1 || !s.originAllowed(vals[0]) && !sameOrigin(vals[0], r.Host) {
				s.forbid(w, r, "this Origin is not allowed to call the gateway")
				return
			}
			if preflight := allowCORS(w, r, vals[0]); preflight {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// allowCORS lets an allowed browser origin read the answer, and answers its
// preflight (reporting true) without reaching any route. No credentials
// mode: Plexus has no cookies, every credential is an explicit header.
func allowCORS(w nethttp.ResponseWriter, r *nethttp.Request, origin string) (preflight bool) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Retry-After, Allow, WWW-Authenticate, Mcp-Session-Id")
	if r.Method != nethttp.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
	h.Set("Access-Control-Allow-Headers", strings.Join([]string{
		"Authorization", "Content-Type", "Last-Event-ID", "Mcp-Session-Id", "Mcp-Protocol-Version",
		plexus.SessionHeader, plexus.ConnectionKeyHeader, plexus.ViaHeader,
	}, ", "))
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(nethttp.StatusNoContent)
	return true
}

func (s *Server) originAllowed(o string) bool {
	c, ok := canonicalOrigin(o)
	return ok && s.origins[c]
}

// sameOrigin reports whether o is the origin the request was sent to:
// http:// and the Host, which the guard has already held to the gateway's
// own loopback authority, named by its address (127.0.0.1 or [::1]). A
// browser sends it on its same-origin POSTs; a rebinding page's origin
// names the attacker's host, and its Host is refused first. "localhost" is
// not taken: it names both loopback addresses, so a page another local
// process served on the other one, on the gateway's port, would share it.
func sameOrigin(o, host string) bool {
	c, ok := canonicalOrigin(o)
	h := strings.ToLower(host)
	return ok && !strings.HasPrefix(h, "localhost:") && c == "http://"+h
}

// forbid answers host_forbidden in the shape of the route asked for. The
// message never echoes the offending header.
func (s *Server) forbid(w nethttp.ResponseWriter, r *nethttp.Request, msg string) {
	e := &plexus.Error{Code: plexus.CodeHostForbidden, Message: msg}
	if isInvoke(r) {
		s.writeInvokeDenial(w, r, "", e.Body(), nethttp.StatusForbidden)
		return
	}
	s.writeError(w, r, e)
}

func isInvoke(r *nethttp.Request) bool { return r.URL.Path == "/invoke" }
