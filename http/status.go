package http

import (
	"bytes"
	"encoding/json"
	"math"
	nethttp "net/http"
	"strconv"

	"github.com/plexus-gw/plexus"
)

// statusTable is the one mapping from error code to HTTP status; docs/errors.md
// documents it for users and must change with it.
//
// The invoke column is the §2 "/invoke" table: every code of the closed union
// but internal_error has a fixed status, mcp_tool_error and transport_error
// are in-band dispatch results (200), and internal_error or any code outside
// the union answers 400. The other column serves every other endpoint, where
// the spec is silent and these statuses are our choice: a server fault is
// 500, a dispatch failure surfacing on a management call (adding a source
// that will not start) is 502.
var statusTable = map[plexus.ErrorCode]struct{ invoke, other int }{
	plexus.CodeGrantRequired:          {401, 401},
	plexus.CodeTokenExpired:           {401, 401},
	plexus.CodeTokenRevoked:           {401, 401},
	plexus.CodeSessionExpired:         {401, 401},
	plexus.CodeGrantPendingUser:       {401, 401},
	plexus.CodeHostForbidden:          {403, 403},
	plexus.CodeUnknownCapability:      {404, 404},
	plexus.CodeSchemaValidationFailed: {422, 422},
	plexus.CodeRateLimited:            {429, 429},
	plexus.CodeSourceUnavailable:      {503, 503},
	plexus.CodeMCPToolError:           {200, 502},
	plexus.CodeTransportError:         {200, 502},
	plexus.CodeInternalError:          {400, 500},

	// Outside the invoke union: /invoke never answers these, so the invoke
	// column is the spec's "any unmapped code" 400.
	plexus.CodeMalformed:      {400, 400},
	plexus.CodeInvalidRequest: {400, 400},
	plexus.CodeUnauthorized:   {400, 401},
	plexus.CodeUnknownCode:    {400, 401},
	plexus.CodeCodeExpired:    {400, 401},
	plexus.CodeCodeConsumed:   {400, 401},
	plexus.CodePersistFailed:  {400, 500},
	plexus.CodeNotFound:       {400, 404},
	plexus.CodeConflict:       {400, 409},
}

// statusFor is the status of code on every endpoint but /invoke; an unknown
// code is a server fault.
func statusFor(code plexus.ErrorCode) int {
	if st, ok := statusTable[code]; ok {
		return st.other
	}
	return nethttp.StatusInternalServerError
}

// invokeStatusFor is the status of an /invoke denial with code.
func invokeStatusFor(code plexus.ErrorCode) int {
	if st, ok := statusTable[code]; ok {
		return st.invoke
	}
	return nethttp.StatusBadRequest
}

// setRetryAfter sets Retry-After on a rate_limited answer when the detail
// says how long to wait: detail.retryAfterSeconds (or detail.retryAfter), in
// seconds, rounded up.
func setRetryAfter(w nethttp.ResponseWriter, b *plexus.ErrorBody) {
	if b == nil || b.Code != plexus.CodeRateLimited || b.Detail == nil {
		return
	}
	raw, err := json.Marshal(b.Detail)
	if err != nil {
		return
	}
	var d struct {
		Seconds *float64 `json:"retryAfterSeconds"`
		Alt     *float64 `json:"retryAfter"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	secs := d.Seconds
	if secs == nil {
		secs = d.Alt
	}
	if secs == nil || *secs < 0 || *secs > 1<<31 {
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(*secs))))
}

// writeError answers err in the uniform ErrorResponse envelope with the
// status of its code. An error that is not a *plexus.Error becomes an
// opaque internal_error; its text is logged here, once, never sent.
func (s *Server) writeError(w nethttp.ResponseWriter, r *nethttp.Request, err error) {
	pe := plexus.AsError(err)
	if pe.Code == plexus.CodeInternalError || pe.Code == plexus.CodePersistFailed {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", pe.Code, "err", err)
	}
	body := pe.Body()
	if pe.Code == plexus.CodeNotFound && body.Discovery == "" {
		body.Discovery = discoveryPath
	}
	setRetryAfter(w, body)
	s.writeJSON(w, r, bodyStatus(err, statusFor), plexus.ErrorResponse{Error: body})
}

// writeInvokeDenial answers an /invoke edge denial: the InvokeResponse shape
// with ok false and auditId "" (the pipeline never saw the call).
func (s *Server) writeInvokeDenial(w nethttp.ResponseWriter, r *nethttp.Request, id string, b *plexus.ErrorBody, status int) {
	setRetryAfter(w, b)
	s.writeJSON(w, r, status, plexus.InvokeResponse{ID: id, OK: false, Error: b, AuditID: ""})
}

// writeJSON writes v with status. Encoding happens before the header is
// written, so a value that cannot be encoded still gets a proper 500.
func (s *Server) writeJSON(w nethttp.ResponseWriter, r *nethttp.Request, status int, v any) {
	buf := s.encodeBuf()
	defer s.putEncodeBuf(buf)
	s.writeEncoded(w, r, status, buf, encodeJSON(buf, v))
}

// writeEncoded writes buf, an encoded answer, with status; or, when its
// encoding failed (err), internal_error in the shape of the route.
func (s *Server) writeEncoded(w nethttp.ResponseWriter, r *nethttp.Request, status int, buf *bytes.Buffer, err error) {
	b := buf.Bytes()
	if err != nil {
		s.log.Error("encode response", "method", r.Method, "path", r.URL.Path, "err", err)
		status = statusFor(plexus.CodeInternalError)
		if isInvoke(r) {
			status = invokeStatusFor(plexus.CodeInternalError)
			b, _ = json.Marshal(plexus.InvokeResponse{Error: &plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "internal error"}})
		} else {
			b, _ = json.Marshal(plexus.ErrorResponse{Error: &plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "internal error"}})
		}
		b = append(b, '\n')
	}
	s.setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_, _ = w.Write(b) // net/http copies b: the buffer can go back to the pool
}

// jsonHeaders are the header values of every JSON answer, made once.
type jsonHeaders struct {
	contentType, cacheControl, noSniff []string
}

// setJSONHeaders sets the headers of a JSON answer on h. The values are
// shared, never written: net/http copies the header map when the status is
// written, and Set or Add replace or grow a value slice rather than write
// into it.
func (s *Server) setJSONHeaders(h nethttp.Header) {
	h["Content-Type"] = s.hdr.contentType
	h["Cache-Control"] = s.hdr.cacheControl
	h["X-Content-Type-Options"] = s.hdr.noSniff
}

func newJSONHeaders() jsonHeaders {
	return jsonHeaders{contentType: []string{"application/json"}, cacheControl: []string{"no-store"}, noSniff: []string{"nosniff"}}
}

// encodeBuf takes a response buffer from the pool, empty.
func (s *Server) encodeBuf() *bytes.Buffer {
	buf, _ := s.encBufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	return buf
}

// encodeJSON writes v's JSON and a newline to buf (json.Marshal into a
// reused buffer) without HTML escaping: an MCP result (a json.RawMessage)
// then passes through as its server wrote it, '<', '>' and '&' included.
// Escaping guards JSON embedded in HTML; these answers are application/json
// with nosniff.
func encodeJSON(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// putEncodeBuf returns buf to the pool unless a large answer (a manifest)
// grew it: the pool should not pin megabytes.
func (s *Server) putEncodeBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		s.encBufs.Put(buf)
	}
}
