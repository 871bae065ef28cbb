package telemetry

import (
	"context"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the OpenTelemetry semantic conventions for MCP
// (gen-ai/mcp.md, Development status) that the front door's spans carry.
const (
	attrMCPMethod      = attribute.Key("mcp.method.name")
	attrMCPSession     = attribute.Key("mcp.session.id")
	attrMCPProtocol    = attribute.Key("mcp.protocol.version")
	attrToolName       = attribute.Key("gen_ai.tool.name")
	attrPromptName     = attribute.Key("gen_ai.prompt.name")
	attrOperationName  = attribute.Key("gen_ai.operation.name")
	attrNetTransport   = attribute.Key("network.transport")
	attrNetProtocol    = attribute.Key("network.protocol.name")
	attrErrorType      = attribute.Key("error.type")
	attrRPCStatusCode  = attribute.Key("rpc.response.status_code")
	transportHTTP      = "tcp"
	transportStdio     = "pipe"
	errorTypeToolError = "tool_error"
)

// MCP transports a front-door span is recorded for.
const (
	MCPOverHTTP  = transportHTTP
	MCPOverStdio = transportStdio
)

// MCPServerSpans is a receiving middleware for the MCP front door: one
// server span per request, named "{mcp.method.name} {target}" with the
// attributes of the MCP semantic conventions. The parent is the trace
// context the client put in params._meta (traceparent), as the
// conventions ask. transport is MCPOverHTTP or MCPOverStdio.
//
// Never recorded: arguments, results, resource URIs (an agent's input may
// name anything), the bearer. The tool or prompt name is the catalog's
// model-safe name the agent asked for.
func MCPServerSpans(tracer trace.Tracer, transport string) mcp.Middleware {
	prop := propagation.TraceContext{}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p := req.GetParams(); p != nil {
				if meta := p.GetMeta(); len(meta) > 0 {
					ctx = prop.Extract(ctx, metaCarrier(meta))
				}
			}
			name, attrs := mcpSpanName(method, req, transport)
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			if !span.IsRecording() {
				return next(ctx, method, req)
			}
			defer span.End()
			res, err := next(ctx, method, req)
			switch {
			case err != nil:
				span.SetAttributes(attrErrorType.String("_OTHER"))
				if code, ok := jsonrpcCode(err); ok {
					span.SetAttributes(attrErrorType.String(code), attrRPCStatusCode.String(code))
				}
				span.SetStatus(codes.Error, "")
			case isToolError(res):
				span.SetAttributes(attrErrorType.String(errorTypeToolError))
				span.SetStatus(codes.Error, "")
			}
			return res, err
		}
	}
}

// mcpSpanName is the span's name and its starting attributes.
func mcpSpanName(method string, req mcp.Request, transport string) (string, []attribute.KeyValue) {
	attrs := []attribute.KeyValue{attrMCPMethod.String(method), attrNetTransport.String(transport)}
	if transport == transportHTTP {
		attrs = append(attrs, attrNetProtocol.String("http"))
	}
	if s := req.GetSession(); s != nil && s.ID() != "" {
		attrs = append(attrs, attrMCPSession.String(s.ID()))
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if v := ex.Header.Get("Mcp-Protocol-Version"); v != "" {
			attrs = append(attrs, attrMCPProtocol.String(v))
		}
	}
	name := method
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil && r.Params.Name != "" {
			name += " " + r.Params.Name
			attrs = append(attrs, attrToolName.String(r.Params.Name), attrOperationName.String("execute_tool"))
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil && r.Params.Name != "" {
			name += " " + r.Params.Name
			attrs = append(attrs, attrPromptName.String(r.Params.Name))
		}
	}
	return name, attrs
}

// jsonrpcCode is the JSON-RPC error code of err, when it carries one.
func jsonrpcCode(err error) (string, bool) {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return strconv.FormatInt(we.Code, 10), true
	}
	return "", false
}

func isToolError(res mcp.Result) bool {
	r, ok := res.(*mcp.CallToolResult)
	return ok && r != nil && r.IsError
}

// metaCarrier reads the trace context a client put in params._meta.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	v, _ := c[key].(string)
	return v
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
