package ipc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/transports/ipc"
)

func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "spec", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		tb.Fatal(err)
	}
	return ts
}

// The examples of §8, copied verbatim from the spec into testdata/spec, are
// the contract: each decodes, envelope and payload.
func TestDecodeSpecExamples(t *testing.T) {
	t.Run("agent.hello", func(t *testing.T) {
		env, err := ipc.DecodeEnvelope(mustRead(t, "agent.hello.json"))
		if err != nil {
			t.Fatal(err)
		}
		if env.V != 1 || env.Type != ipc.TypeAgentHello || env.ID != "f3a1d2b0-3c2f-4f6a-9f3f-3f5d0f8f9b2a" ||
			!env.TS.Equal(mustTime(t, "2026-01-16T12:00:00Z")) {
			t.Errorf("envelope = %+v", env)
		}
		got, err := ipc.DecodePayload[ipc.Hello](env)
		if err != nil {
			t.Fatal(err)
		}
		want := ipc.Hello{
			SessionToken: "<redacted>",
			AgentID:      "com.graphonomous.core",
			AgentVersion: "1.0.0",
			Protocol: ipc.HelloProtocol{
				SupportedVersions: []int{1},
				Capabilities:      []string{"tools", "streaming", "cancellation"},
			},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("payload (-want +got):\n%s", diff)
		}
	})
	t.Run("core.tool.call", func(t *testing.T) {
		env, err := ipc.DecodeEnvelope(mustRead(t, "core.tool.call.json"))
		if err != nil {
			t.Fatal(err)
		}
		if env.Type != ipc.TypeCoreToolCall || env.RequestID != "8d0f8a5a-2f0a-4b76-9a9c-4c2b7b9a0c1d" ||
			env.CorrelationID != "chat_session:abc123" {
			t.Errorf("envelope = %+v", env)
		}
		got, err := ipc.DecodePayload[ipc.ToolCall](env)
		if err != nil {
			t.Fatal(err)
		}
		if got.CallID != "9b1a2c3d-4e5f-6789-abcd-ef0123456789" || got.ToolID != "com.graphonomous.core/graph_search" ||
			got.TimeoutMS != 30000 {
			t.Errorf("payload = %+v", got)
		}
		var input map[string]any
		if err := json.Unmarshal(got.Input, &input); err != nil || input["query"] != "foo" || input["top_k"] != 5.0 {
			t.Errorf("input = %s (%v)", got.Input, err)
		}
	})
	t.Run("agent.tool.result", func(t *testing.T) {
		env, err := ipc.DecodeEnvelope(mustRead(t, "agent.tool.result.json"))
		if err != nil {
			t.Fatal(err)
		}
		if env.Type != ipc.TypeAgentToolResult || env.RequestID != "8d0f8a5a-2f0a-4b76-9a9c-4c2b7b9a0c1d" ||
			env.CorrelationID != "chat_session:abc123" {
			t.Errorf("envelope = %+v", env)
		}
		got, err := ipc.DecodePayload[ipc.ToolResult](env)
		if err != nil {
			t.Fatal(err)
		}
		if got.CallID != "9b1a2c3d-4e5f-6789-abcd-ef0123456789" || got.Status != ipc.StatusSucceeded ||
			got.StartedAt != "2026-01-16T12:00:01Z" || got.FinishedAt != "2026-01-16T12:00:02Z" || got.Error != nil {
			t.Errorf("payload = %+v", got)
		}
		var out struct {
			QueryID string `json:"query_id"`
		}
		if err := json.Unmarshal(got.Output, &out); err != nil || out.QueryID != "q_123" {
			t.Errorf("output = %s (%v)", got.Output, err)
		}
	})
}

// Every example travels through the frame codec and back unchanged.
func TestSpecExamplesFrameRoundTrip(t *testing.T) {
	for _, name := range []string{"agent.hello.json", "core.tool.call.json", "agent.tool.result.json"} {
		b := mustRead(t, name)
		var buf bytes.Buffer
		if err := ipc.WriteFrame(&buf, b, 0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ipc.ReadFrame(&buf, 0)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: round trip = %q, %v", name, got, err)
		}
	}
}

func TestDecodeEnvelopeUnknownFieldsIgnored(t *testing.T) {
	in := `{"v":1,"type":"agent.heartbeat","id":"m1","ts":"2026-01-16T12:00:00.5+01:00","future":{"x":[1]},
		"causation_id":"c1","in_reply_to":"m0","actor":{"type":"system","id":"core","display":"Core","extra":1},
		"payload":{"session_id":"s1","uptime_ms":1200,"inflight_calls":2,"status":"ok","new_field":true}}`
	env, err := ipc.DecodeEnvelope([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if env.CausationID != "c1" || env.InReplyTo != "m0" {
		t.Errorf("correlation = %+v", env)
	}
	if diff := cmp.Diff(&ipc.Actor{Type: ipc.ActorSystem, ID: "core", Display: "Core"}, env.Actor); diff != "" {
		t.Errorf("actor (-want +got):\n%s", diff)
	}
	hb, err := ipc.DecodePayload[ipc.Heartbeat](env)
	if err != nil {
		t.Fatal(err)
	}
	want := ipc.Heartbeat{SessionID: "s1", UptimeMS: 1200, InflightCalls: 2, Status: ipc.HealthOK}
	if diff := cmp.Diff(want, hb); diff != "" {
		t.Errorf("heartbeat (-want +got):\n%s", diff)
	}
}

func TestDecodeEnvelopeRefused(t *testing.T) {
	const ok = `"type":"agent.hello","id":"m1","ts":"2026-01-16T12:00:00Z","payload":{}`
	tests := []struct {
		name      string
		in        string
		wantField string
		wantCode  string
	}{
		{"NotObject", `[1]`, "", ipc.CodeInvalidEnvelope},
		{"MissingV", `{` + ok + `}`, "v", ipc.CodeInvalidEnvelope},
		{"NullV", `{"v":null,` + ok + `}`, "v", ipc.CodeInvalidEnvelope},
		{"StringV", `{"v":"1",` + ok + `}`, "v", ipc.CodeInvalidEnvelope},
		{"FractionV", `{"v":1.5,` + ok + `}`, "v", ipc.CodeInvalidEnvelope},
		{"V2", `{"v":2,` + ok + `}`, "v", ipc.CodeUnsupportedVersion},
		{"MissingType", `{"v":1,"id":"m1","ts":"2026-01-16T12:00:00Z","payload":{}}`, "type", ipc.CodeInvalidEnvelope},
		{"EmptyType", `{"v":1,"type":"","id":"m1","ts":"2026-01-16T12:00:00Z","payload":{}}`, "type", ipc.CodeInvalidEnvelope},
		{"NumberType", `{"v":1,"type":3,"id":"m1","ts":"2026-01-16T12:00:00Z","payload":{}}`, "type", ipc.CodeInvalidEnvelope},
		{"MissingID", `{"v":1,"type":"agent.hello","ts":"2026-01-16T12:00:00Z","payload":{}}`, "id", ipc.CodeInvalidEnvelope},
		{"MissingTS", `{"v":1,"type":"agent.hello","id":"m1","payload":{}}`, "ts", ipc.CodeInvalidEnvelope},
		{"BadTS", `{"v":1,"type":"agent.hello","id":"m1","ts":"yesterday","payload":{}}`, "ts", ipc.CodeInvalidEnvelope},
		{"MissingPayload", `{"v":1,"type":"agent.hello","id":"m1","ts":"2026-01-16T12:00:00Z"}`, "payload", ipc.CodeInvalidEnvelope},
		{"NullPayload", `{"v":1,"type":"agent.hello","id":"m1","ts":"2026-01-16T12:00:00Z","payload":null}`, "payload", ipc.CodeInvalidEnvelope},
		{"ArrayPayload", `{"v":1,"type":"agent.hello","id":"m1","ts":"2026-01-16T12:00:00Z","payload":[]}`, "payload", ipc.CodeInvalidEnvelope},
		{"BadRequestID", `{"v":1,` + ok + `,"request_id":7}`, "request_id", ipc.CodeInvalidEnvelope},
		{"BadActor", `{"v":1,` + ok + `,"actor":"me"}`, "actor", ipc.CodeInvalidEnvelope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ipc.DecodeEnvelope([]byte(tt.in))
			var ee *ipc.EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v, want an *EnvelopeError", err)
			}
			if ee.Field != tt.wantField {
				t.Errorf("field = %q, want %q (%v)", ee.Field, tt.wantField, err)
			}
			if ee.Code() != tt.wantCode {
				t.Errorf("code = %q, want %q", ee.Code(), tt.wantCode)
			}
		})
	}
}

func TestDecodePayloadWrongType(t *testing.T) {
	env, err := ipc.DecodeEnvelope([]byte(`{"v":1,"type":"core.tool.call","id":"m1","ts":"2026-01-16T12:00:00Z",
		"payload":{"call_id":"c1","tool_id":["not","a","string"],"input":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ipc.DecodePayload[ipc.ToolCall](env)
	var ee *ipc.EnvelopeError
	if !errors.As(err, &ee) || ee.Field != "payload.tool_id" {
		t.Fatalf("err = %v, want an EnvelopeError on payload.tool_id", err)
	}
	if strings.Contains(err.Error(), `"a"`) {
		t.Errorf("error %q quotes the value", err)
	}
}

func TestErrorReply(t *testing.T) {
	req, err := ipc.DecodeEnvelope([]byte(`{"v":1,"type":"agent.mystery","id":"m7","ts":"2026-01-16T12:00:00Z",
		"request_id":"r1","correlation_id":"k1","causation_id":"c1","payload":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ipc.KnownType(req.Type) {
		t.Fatalf("KnownType(%q) = true", req.Type)
	}
	reply := ipc.ErrorReply(req, ipc.CodeUnknownType, "unknown message type")
	if _, err := ipc.EncodeEnvelope(reply); err == nil {
		t.Error("an unstamped reply was encoded")
	}
	reply.ID = "m8"
	reply.TS = mustTime(t, "2026-01-16T12:00:01Z")
	b, err := ipc.EncodeEnvelope(reply)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"v":              1.0,
		"type":           "core.error",
		"id":             "m8",
		"ts":             "2026-01-16T12:00:01Z",
		"in_reply_to":    "m7",
		"request_id":     "r1",
		"correlation_id": "k1",
		"causation_id":   "c1",
		"payload":        map[string]any{},
		"error":          map[string]any{"code": "protocol.unknown_type", "message": "unknown message type"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reply (-want +got):\n%s", diff)
	}
	// The reply is itself a valid envelope.
	if _, err := ipc.DecodeEnvelope(b); err != nil {
		t.Errorf("DecodeEnvelope(reply) = %v", err)
	}
}

func TestKnownType(t *testing.T) {
	for _, typ := range ipc.Types() {
		if !ipc.KnownType(typ) {
			t.Errorf("KnownType(%q) = false", typ)
		}
	}
	for _, typ := range []string{"", "core.error", "agent.tool.call", "Agent.Hello", "agent.hello "} {
		if ipc.KnownType(typ) {
			t.Errorf("KnownType(%q) = true", typ)
		}
	}
	if n := len(ipc.Types()); n != 15 {
		t.Errorf("%d types, want the 15 of §4", n)
	}
}

func TestHelloRedactsToken(t *testing.T) {
	h := ipc.Hello{SessionToken: "tok-s3cret", AgentID: "a"}
	var buf bytes.Buffer
	for _, s := range []string{h.String(), h.LogValue().String()} {
		buf.WriteString(s)
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Errorf("token shown: %s", buf.String())
	}
}

func TestEncodeEnvelopeRoundTrip(t *testing.T) {
	payload, err := json.Marshal(ipc.Welcome{
		AcceptedVersion: 1, SessionID: "s1", HeartbeatIntervalMS: 5000, MaxFrameBytes: ipc.DefaultMaxFrameBytes,
		Server: ipc.ServerInfo{CoreVersion: "0.1.0", InstanceID: "i1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := ipc.Envelope{V: 1, Type: ipc.TypeCoreWelcome, ID: "m1", TS: mustTime(t, "2026-01-16T12:00:00Z"),
		Payload: payload, InReplyTo: "m0", Actor: &ipc.Actor{Type: ipc.ActorSystem, ID: "plexus"}}
	b, err := ipc.EncodeEnvelope(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ipc.DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, field := range []string{`"accepted_version":1`, `"session_id":"s1"`, `"heartbeat_interval_ms":5000`,
		`"max_frame_bytes":4194304`, `"server":{"core_version":"0.1.0","instance_id":"i1"}`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("%s lacks %s", b, field)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, name := range []string{"agent.hello.json", "core.tool.call.json", "agent.tool.result.json"} {
		f.Add(mustRead(f, name))
	}
	for _, s := range []string{`{}`, `[]`, `{"v":1}`, `{"v":2,"type":"x","id":"y","ts":"2026-01-16T12:00:00Z","payload":{}}`,
		`{"v":1,"type":"x","id":"y","ts":"2026-01-16T12:00:00Z","payload":{"call_id":5}}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		env, err := ipc.DecodeEnvelope(in)
		if err != nil {
			var ee *ipc.EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v (%T), want an *EnvelopeError", err, err)
			}
			return
		}
		if env.V != ipc.Version || env.Type == "" || env.ID == "" || env.TS.IsZero() {
			t.Fatalf("accepted an envelope missing a required field: %+v", env)
		}
		// Payload decoding never panics, whatever the type.
		_, _ = ipc.DecodePayload[ipc.ToolCall](env)
		_, _ = ipc.DecodePayload[ipc.ToolsRegister](env)
		_, _ = ipc.DecodePayload[ipc.Hello](env)
		// What was accepted encodes and decodes again.
		b, err := ipc.EncodeEnvelope(env)
		if err != nil {
			t.Fatalf("EncodeEnvelope of an accepted envelope: %v", err)
		}
		if _, err := ipc.DecodeEnvelope(b); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}
