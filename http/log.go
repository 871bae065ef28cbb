package http

import (
	"log/slog"
	nethttp "net/http"
	"time"
)

// logRequests writes one Debug line per request: method, path (never the
// query, which may carry ids a client put there), status and duration. It
// never logs headers, bodies or credentials.
func (s *Server) logRequests(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = nethttp.StatusOK
		}
		s.log.Debug("http request",
			"method", r.Method, "path", r.URL.Path,
			"status", sw.status, "duration", time.Since(start))
	})
}

// statusWriter records the status written through it. Unwrap lets
// http.ResponseController reach the connection (Flush, deadlines).
type statusWriter struct {
	nethttp.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = nethttp.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() nethttp.ResponseWriter { return w.ResponseWriter }
