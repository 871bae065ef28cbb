package http

// The daemon binds its listener before it builds the server (it needs the
// address first) and calls Serve; only the tests take the handler alone or
// let the server bind.

import (
	"fmt"
	"net"
	nethttp "net/http"
)

// Handler returns the guarded handler with every route. The Host guard
// expects the port of Options.Addr unless Listen or Serve has learnt another.
func (s *Server) Handler() nethttp.Handler { return s.handler }

// Listen binds Options.Addr synchronously and records the bound port, so
// "127.0.0.1:0" works and a bind error surfaces before anything is served.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", s.opts.Addr, err)
	}
	s.learnPort(ln)
	return ln, nil
}
