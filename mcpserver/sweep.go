package mcpserver

import (
	"context"
	"time"

	"github.com/plexus-gw/plexus"
)

// DefaultSessionCheck is the default of [Options.SessionCheck].
const DefaultSessionCheck = time.Second

// sweep ends the hosts whose Plexus session ended: the agent revoked, the
// session revoked or expired. Neither is announced on the catalog's change
// stream, and a listen stream sends no request that would meet the check,
// so without this such a host would keep its stream, its SDK server and
// its upstream subscriptions. Ending the host's session drops its watches
// (dropAtEnd), unsubscribing upstream those no other host holds. A host is
// asked about only when the gateway's state changed since the last sweep
// (*gen), or its link's time is up.
func (s *Server) sweep(ctx context.Context, gen *uint64) {
	now, cur := s.opts.Clock(), s.b.Sessions.StateGeneration()
	changed := cur != *gen
	*gen = cur
	for _, h := range s.hosts.live() {
		if !changed && now.Before(h.l.expires) {
			continue
		}
		_, err := s.b.Sessions.SessionAgent(ctx, h.l.creds())
		if err == nil || !sessionEnded(err) {
			continue
		}
		s.links.forget(h.l)
		s.end(h)
	}
}

// end closes h's session. As at a host's DELETE (ServeHTTP), a session's
// calls end first, so that none is answered as the SDK closes it; a
// listen stream carries no calls.
func (s *Server) end(h *host) {
	id := h.ss.ID()
	if !h.listen && id != "" {
		s.calls.end(id)
		defer s.calls.forget(id)
	}
	if err := h.ss.Close(); err != nil {
		s.log.Debug("the session of an ended Plexus session not closed", "err", err)
	}
}

// sessionEnded reports whether err says the Plexus session is over.
func sessionEnded(err error) bool {
	switch plexus.AsError(err).Code {
	case plexus.CodeSessionExpired, plexus.CodeTokenRevoked, plexus.CodeTokenExpired, plexus.CodeUnauthorized:
		return true
	}
	return false
}
