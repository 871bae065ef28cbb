package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/telemetry"
)

// traceCanary is a call input that must never reach a span.
const traceCanary = "canary-input-7f3a9c"

// TestTraces: with a tracer, a call over HTTP is a span carrying its
// capability, outcome, audit id and the journal's trace id; a decision is a
// span naming its channel; an MCP tools/call is a server span following the
// OpenTelemetry MCP conventions, continuing the trace the client put in
// params._meta, with the call's span under it. No span holds a credential
// or an input.
func TestTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	td := startTestDaemon(t, daemon.Options{Tracing: telemetry.NewTracing(keptSpans{exp})})
	addEcho(t, td, "test", "")
	addPortal(t, td, "notes")
	pat, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	_, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": traceCanary}})
	if !resp.OK {
		t.Fatalf("invoke: %s", raw)
	}
	row, ok := td.auditRow(t, resp.AuditID)
	if !ok || row.TraceID == "" {
		t.Fatalf("audit row %s: %+v", resp.AuditID, row)
	}
	p := grantPending(t, td, sid, map[string]any{"test.echo.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	approve(t, td, p.PendingID, plexus.DecideRequest{})
	parent := callOverMCP(t, td, pat)
	td.stop() // flushes the batched spans
	spans := exp.GetSpans()

	t.Run("Call", func(t *testing.T) {
		s := findSpan(t, spans, "plexus.invoke", func(s tracetest.SpanStub) bool {
			return attr(s, "plexus.audit_id") == resp.AuditID
		})
		for k, want := range map[string]string{"plexus.capability.id": "test.echo.read", "plexus.outcome": "ok",
			"plexus.via": "http", "plexus.trace_id": row.TraceID} {
			if got := attr(s, k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
	})
	t.Run("Decisions", func(t *testing.T) {
		for _, via := range []string{plexus.ViaSystem, plexus.ViaAdminAPI} {
			findSpan(t, spans, "plexus.decision grant.approved", func(s tracetest.SpanStub) bool { return attr(s, "plexus.via") == via })
		}
	})
	t.Run("MCP", func(t *testing.T) {
		s := findSpan(t, spans, "tools/call portal__notes__read", func(tracetest.SpanStub) bool { return true })
		if s.SpanKind != trace.SpanKindServer {
			t.Errorf("kind = %v, want server", s.SpanKind)
		}
		for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "portal__notes__read",
			"gen_ai.operation.name": "execute_tool", "network.transport": "tcp"} {
			if got := attr(s, k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if attr(s, "mcp.protocol.version") == "" {
			t.Errorf("no mcp.protocol.version on %v", s.Attributes)
		}
		if s.SpanContext.TraceID() != parent.TraceID() || s.Parent.SpanID() != parent.SpanID() {
			t.Errorf("span continues %v/%v, want the client's %v/%v", s.SpanContext.TraceID(), s.Parent.SpanID(), parent.TraceID(), parent.SpanID())
		}
		call := findSpan(t, spans, "plexus.invoke", func(c tracetest.SpanStub) bool { return attr(c, "plexus.via") == "mcp" })
		if call.Parent.SpanID() != s.SpanContext.SpanID() {
			t.Errorf("the MCP call's invoke span is not under its tools/call span")
		}
	})
	t.Run("NoSecrets", func(t *testing.T) {
		for _, s := range spans {
			var texts []string
			texts = append(texts, s.Name)
			for _, a := range s.Attributes {
				texts = append(texts, a.Value.String())
			}
			for _, e := range s.Events {
				texts = append(texts, e.Name)
				for _, a := range e.Attributes {
					texts = append(texts, a.Value.String())
				}
			}
			all := strings.Join(texts, "\n")
			for _, secret := range []string{traceCanary, pat, tok.Token, td.key, sid, "Hello from the notes folder"} {
				if strings.Contains(all, secret) {
					t.Errorf("span %q holds a secret or an input (%.12s…)", s.Name, secret)
				}
			}
		}
	})
}

// keptSpans keeps what it was handed past the daemon's shutdown (the
// in-memory exporter forgets its spans when shut down).
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// callOverMCP reads hello.md through the MCP front door with a trace
// context in params._meta, and returns that context.
func callOverMCP(t *testing.T, td *testDaemon, pat string) trace.SpanContext {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		SpanID: trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled})
	traceparent := "00-" + parent.TraceID().String() + "-" + parent.SpanID().String() + "-01"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": traceparent},
		Name: "portal__notes__read", Arguments: map[string]any{"path": "hello.md"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	return parent
}

// findSpan is the first span named name that match accepts.
func findSpan(t *testing.T, spans tracetest.SpanStubs, name string, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var names []string
	for _, s := range spans {
		if s.Name == name && match(s) {
			return s
		}
		names = append(names, s.Name)
	}
	t.Fatalf("no span %q that matches among %v", name, names)
	return tracetest.SpanStub{}
}

// attr is the value of span attribute key, "" when absent.
func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if a.Key == attribute.Key(key) {
			return a.Value.String()
		}
	}
	return ""
}

// An agent sending a traceparent whose sampled flag is off cannot keep its
// MCP calls (or the plexus.invoke spans under them) out of the owner's
// traces: both calls are exported, the unsampled one still in the agent's
// trace.
func TestTraceUnsampledParentStillTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	td := startTestDaemon(t, daemon.Options{Tracing: telemetry.NewTracing(keptSpans{exp})})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "claude")
	c := mcp.NewClient(&mcp.Implementation{Name: "sneaky", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string]string{"00": "4bf92f3577b34da6a3ce929d0e0e4730", "01": "4bf92f3577b34da6a3ce929d0e0e4731"}
	for flags, traceID := range traces {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
			Meta: mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-" + flags},
			Name: "portal__notes__read", Arguments: map[string]any{"path": "hello.md"}})
		if err != nil || res.IsError {
			t.Fatalf("call with flags %s: %v %+v", flags, err, res)
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	td.stop() // flushes the batched spans
	for flags, traceID := range traces {
		for _, name := range []string{"tools/call portal__notes__read", "plexus.invoke"} {
			found := false
			for _, s := range exp.GetSpans() {
				found = found || (s.Name == name && s.SpanContext.TraceID().String() == traceID)
			}
			if !found {
				t.Errorf("no %q span exported in trace %s (the agent's sampled flag %s)", name, traceID, flags)
			}
		}
	}
}
