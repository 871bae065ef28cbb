package mcpclient

import (
	"context"
	"log/slog"
	"sort"
	"strings"
)

// redactor replaces the configured secrets (env and header values, a URL's
// query) in text bound for a log, an error or a health detail. Values
// shorter than 3 bytes are left alone: replacing them would garble every
// message and hide nothing.
type redactor []string

func newRedactor(cfg ServerConfig) redactor {
	var r redactor
	add := func(v string) {
		if len(v) >= 3 {
			r = append(r, v)
		}
	}
	for _, v := range cfg.Env {
		add(v)
	}
	for _, v := range cfg.Headers {
		add(v)
	}
	if i := strings.IndexByte(cfg.URL, '?'); i >= 0 {
		add(cfg.URL[i+1:])
	}
	// Longest first, so that a secret containing another is replaced whole.
	sort.Slice(r, func(i, j int) bool { return len(r[i]) > len(r[j]) })
	return r
}

func (r redactor) string(s string) string {
	for _, v := range r {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

func (r redactor) err(err error) string {
	if err == nil {
		return ""
	}
	return r.string(err.Error())
}

// redactHandler redacts every message and attribute on its way to the
// handler below. The client's logger goes through it, and so does what the
// SDK logs through it (errors that may quote a URL or a server's words).
type redactHandler struct {
	slog.Handler
	r redactor
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.string(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return redactHandler{Handler: h.Handler.WithAttrs(red), r: h.r}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{Handler: h.Handler.WithGroup(name), r: h.r}
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.string(v.String()))
	case slog.KindGroup:
		as := v.Group()
		red := make([]any, len(as))
		for i, g := range as {
			red[i] = h.attr(g)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.err(err))
		}
		return slog.String(a.Key, h.r.string(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
