package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"strconv"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/jsonenc"
)

func (s *Server) handleWellKnown(w nethttp.ResponseWriter, r *nethttp.Request) {
	s.writeJSON(w, r, nethttp.StatusOK, s.b.Agents.WellKnown())
}

func (s *Server) handleEnroll(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.EnrollRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.b.Agents.Enroll(r.Context(), r.RemoteAddr, req)
	s.reply(w, r, resp, err)
}

// handleHandshake accepts an empty body: an agent on the PAT path has nothing
// to say beyond its Bearer.
func (s *Server) handleHandshake(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.HandshakeRequest
	if err := s.decode(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	hs, err := s.b.Agents.HandshakeStream(r.Context(), credentials(r), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeManifest(w, r, hs.Head, hs.Manifest.Entries)
}

// handleRequestGrants answers 200 with the ScopedToken when every grant was
// decided, and 202 Accepted with the GrantPendingResponse when any waits for
// the owner: the request was taken, its outcome comes later.
func (s *Server) handleRequestGrants(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.GrantRequest
	c, ok := s.decodeSession(w, r, &req, &req.SessionID)
	if !ok {
		return
	}
	tok, pending, err := s.b.Grants.RequestGrants(r.Context(), c, req)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case pending != nil:
		s.writeJSON(w, r, nethttp.StatusAccepted, pending)
	case tok != nil:
		s.writeJSON(w, r, nethttp.StatusOK, tok)
	default:
		s.writeError(w, r, plexus.Errorf(plexus.CodeInternalError, "internal error"))
	}
}

func (s *Server) handleStandingGrants(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Grants.StandingGrants(r.Context(), credentials(r))
	s.reply(w, r, resp, err)
}

func (s *Server) handleGrantStatus(w nethttp.ResponseWriter, r *nethttp.Request) {
	id := r.URL.Query().Get("pendingId")
	if id == "" {
		s.writeError(w, r, plexus.Errorf(plexus.CodeInvalidRequest, "the pendingId query parameter is required"))
		return
	}
	resp, err := s.b.Grants.GrantStatus(r.Context(), credentials(r), id)
	s.reply(w, r, resp, err)
}

func (s *Server) handleRefresh(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.RefreshRequest
	c, ok := s.decodeSession(w, r, &req, &req.SessionID)
	if !ok {
		return
	}
	resp, err := s.b.Grants.Refresh(r.Context(), c, req)
	s.reply(w, r, resp, err)
}

func (s *Server) handleRevoke(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.RevokeRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.b.Grants.Revoke(r.Context(), credentials(r), req)
	s.reply(w, r, resp, err)
}

func (s *Server) handleManifest(w nethttp.ResponseWriter, r *nethttp.Request) {
	m, err := s.b.Agents.ManifestStream(r.Context(), credentials(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeManifest(w, r, plexus.ManifestResponse{Manifest: m.Head}, m.Entries)
}

// handleInvoke always answers an InvokeResponse. A body that cannot be read
// as an InvokeRequest with an id is an edge denial (auditId ""), 422, or
// 413 when it is too large; everything else is the gateway's answer with
// the status of its error code.
func (s *Server) handleInvoke(w nethttp.ResponseWriter, r *nethttp.Request) {
	req, err := s.readInvoke(w, r)
	if err != nil {
		b := &plexus.ErrorBody{Code: plexus.CodeSchemaValidationFailed, Message: bodyMessage(err), CapabilityID: req.ID}
		s.writeInvokeDenial(w, r, req.ID, b, bodyStatus(err, func(plexus.ErrorCode) int {
			return invokeStatusFor(plexus.CodeSchemaValidationFailed)
		}))
		return
	}
	if req.ID == "" {
		b := &plexus.ErrorBody{Code: plexus.CodeSchemaValidationFailed, Message: "the id field is required"}
		s.writeInvokeDenial(w, r, "", b, invokeStatusFor(plexus.CodeSchemaValidationFailed))
		return
	}

	if wantsStream(r) {
		s.invokeStream(w, r, req)
		return
	}
	s.writeInvoke(w, r, s.b.Invoke.Invoke(r.Context(), credentials(r), req))
}

// readInvoke reads the call from r's body into a recycled buffer, which
// nothing keeps: the request's strings and input are copies.
func (s *Server) readInvoke(w nethttp.ResponseWriter, r *nethttp.Request) (plexus.InvokeRequest, error) {
	bp, _ := s.bodyBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, err := s.readCapped(w, r, *bp)
	var req plexus.InvokeRequest
	if err == nil {
		req, err = invokeRequest(data)
	}
	if err == nil && cap(data) <= 64<<10 { // the pool should not pin a large body
		*bp = data[:0]
	}
	s.bodyBufs.Put(bp)
	return req, err
}

// writeInvoke writes an InvokeResponse as JSON with the status of its error
// code (200 when it succeeded).
func (s *Server) writeInvoke(w nethttp.ResponseWriter, r *nethttp.Request, resp plexus.InvokeResponse) {
	status := nethttp.StatusOK
	if !resp.OK {
		var code plexus.ErrorCode
		if resp.Error != nil {
			code = resp.Error.Code
		}
		status = invokeStatusFor(code)
		setRetryAfter(w, resp.Error)
	}
	buf := s.encodeBuf()
	defer s.putEncodeBuf(buf)
	s.writeEncoded(w, r, status, buf, encodeInvoke(buf, &resp))
}

// encodeInvoke writes resp as encodeJSON does, byte for byte, appending
// the fields itself: an output that is a decoded JSON tree (an echoed input,
// a JSON file's contents) and an MCP result (raw JSON, compacted as
// encoding/json compacts a RawMessage) then cost no reflection. Any other
// output goes through encodeJSON whole.
func encodeInvoke(buf *bytes.Buffer, resp *plexus.InvokeResponse) error {
	b := buf.AvailableBuffer()
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, resp.ID, false)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, resp.OK)
	if resp.Output != nil {
		b = append(b, `,"output":`...)
		var ok bool
		if b, ok = jsonenc.Append(b, resp.Output, false); !ok {
			buf.Reset()
			return encodeJSON(buf, *resp)
		}
	}
	buf.Write(b) // b is buf's own free space: this only moves its end
	if len(resp.MCPResult) > 0 {
		buf.WriteString(`,"mcpResult":`)
		if err := json.Compact(buf, resp.MCPResult); err != nil {
			return fmt.Errorf("mcpResult: %w", err)
		}
	}
	if resp.Error != nil {
		buf.WriteString(`,"error":`)
		if err := encodeJSON(buf, resp.Error); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // encodeJSON's newline
	}
	b = buf.AvailableBuffer()
	b = append(b, `,"auditId":`...)
	b = jsonenc.AppendString(b, resp.AuditID, false)
	b = append(b, "}\n"...)
	buf.Write(b)
	return nil
}

// reply writes resp with 200, or err in the envelope.
func (s *Server) reply(w nethttp.ResponseWriter, r *nethttp.Request, resp any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, nethttp.StatusOK, resp)
}
