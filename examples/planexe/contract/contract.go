// Package contract is the contract test suite of the PlanExe MCP interface
// v1.0 (spec §17.1, with the §17.2 determinism and §17.3 concurrency
// checks), written against a [Caller] so that the very same cases run
// against a PlanExe server directly over MCP and through a gateway that
// forwards tool calls (Plexus /invoke, where the MCP CallToolResult arrives
// verbatim as mcpResult).
//
// The suite knows the task DAG of the deterministic stand-in planner in
// package planexe (it asserts which tasks a resume recomputes), so it is a
// contract for that server, not for every PlanExe implementation.
//
// It never sleeps a fixed amount to let something happen: it polls with a
// bounded deadline (10 s), and where a case needs a run to still be running
// when its next call arrives, it retries on a fresh session if the run
// finished first. The server must therefore be launched with a per-task
// delay that makes a run last a little while (20 ms per task, nine tasks,
// is plenty); the delay bounds nothing but the suite's speed.
//
// This package must never depend on the server's implementation: it speaks
// only the wire, through Caller.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller calls one PlanExe tool and returns its result. A tool that refuses
// a call answers with Result.IsError set, which is not a Go error; the error
// is for a call that produced no CallToolResult at all (transport failure,
// JSON-RPC error).
//
// Call must be safe for concurrent use: the suite runs its cases in
// parallel, each on its own sessions.
type Caller interface {
	Call(ctx context.Context, tool string, args map[string]any) (Result, error)
}

// Result is one tool result.
type Result struct {
	// Structured is the result's structuredContent: the spec's response
	// object, or {"error": {"code", "message", "details"}} when IsError.
	Structured json.RawMessage
	// IsError is the result's isError.
	IsError bool
	// Raw is the full MCP CallToolResult JSON ({"content": [...],
	// "structuredContent": ..., "isError": ...}) as the caller received it.
	// The suite checks that its text content carries the same JSON as
	// Structured.
	Raw json.RawMessage
}

// ResultFromRaw builds a Result from a CallToolResult's JSON, for callers
// that receive it as bytes (such as a gateway's mcpResult).
func ResultFromRaw(raw json.RawMessage) (Result, error) {
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Result{}, fmt.Errorf("decode CallToolResult: %w", err)
	}
	return Result{Structured: r.StructuredContent, IsError: r.IsError, Raw: raw}, nil
}

// SessionCaller is a Caller over an MCP client session of the go-sdk.
type SessionCaller struct {
	Session *mcp.ClientSession
	// Meta, if set, is sent as every call's _meta (for example a
	// "planexe/user_id").
	Meta mcp.Meta
}

// Call implements [Caller].
func (c SessionCaller) Call(ctx context.Context, tool string, args map[string]any) (Result, error) {
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: c.Meta})
	if err != nil {
		return Result{}, fmt.Errorf("call %s: %w", tool, err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return Result{}, fmt.Errorf("encode %s result: %w", tool, err)
	}
	return ResultFromRaw(raw)
}

// Run runs every contract case against c as parallel subtests of t, and
// returns when all of them have finished (so a caller may close c after
// Run returns).
func Run(t *testing.T, c Caller) {
	t.Helper()
	s := &suite{c: c}
	// The group subtest does not return until its parallel children are
	// done, so Run does not return early either.
	t.Run("contract", func(t *testing.T) {
		for _, tc := range s.cases() {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t)
			})
		}
	})
}

type testCase struct {
	name string
	run  func(t *testing.T)
}

type suite struct {
	c Caller
}

// Timeouts of the suite: one call, and one wait for a state.
const (
	callTimeout = 30 * time.Second
	waitTimeout = 10 * time.Second
	pollEvery   = 10 * time.Millisecond
)

// call makes one call and checks the result's shape: a JSON object as
// structuredContent, mirrored as JSON text in content, and, for an error, a
// §11 error object.
func (s *suite) call(t *testing.T, tool string, args map[string]any) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := s.c.Call(ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(res.Structured, &obj); err != nil || obj == nil {
		t.Fatalf("%s: structuredContent is not a JSON object: %s", tool, res.Structured)
	}
	var raw struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res.Raw, &raw); err != nil {
		t.Fatalf("%s: raw CallToolResult does not decode: %v", tool, err)
	}
	if raw.IsError != res.IsError {
		t.Fatalf("%s: raw isError %v, Result.IsError %v", tool, raw.IsError, res.IsError)
	}
	mirrored := false
	for _, c := range raw.Content {
		if c.Type == "text" && sameJSON(c.Text, res.Structured) {
			mirrored = true
		}
	}
	if !mirrored {
		t.Fatalf("%s: no text content carries the structuredContent JSON: %s", tool, res.Raw)
	}
	if res.IsError {
		var e errorBody
		if err := json.Unmarshal(res.Structured, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s: error result is not {\"error\":{\"code\",\"message\"}}: %s", tool, res.Structured)
		}
	}
	return res
}

func sameJSON(text string, structured json.RawMessage) bool {
	var a, b any
	if json.Unmarshal([]byte(text), &a) != nil || json.Unmarshal(structured, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// ok calls tool, requires success, decodes the result into out (if non-nil)
// and checks that the fields named in required are present.
func (s *suite) ok(t *testing.T, tool string, args map[string]any, out any, required ...string) {
	t.Helper()
	res := s.call(t, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: refused: %s", tool, args, res.Structured)
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(res.Structured, &obj) // call checked it is an object
	for _, f := range required {
		if _, ok := obj[f]; !ok {
			t.Fatalf("%s: response lacks %q: %s", tool, f, res.Structured)
		}
	}
	if out != nil {
		if err := json.Unmarshal(res.Structured, out); err != nil {
			t.Fatalf("%s: decode %s: %v", tool, res.Structured, err)
		}
	}
}

// refused calls tool, requires an error result with code, and returns the
// error's details.
func (s *suite) refused(t *testing.T, tool string, args map[string]any, code string) map[string]any {
	t.Helper()
	res := s.call(t, tool, args)
	if !res.IsError {
		t.Fatalf("%s %v: got success %s, want error %s", tool, args, res.Structured, code)
	}
	var e errorBody
	_ = json.Unmarshal(res.Structured, &e) // call checked its shape
	if e.Error.Code != code {
		t.Fatalf("%s %v: got error %s (%s), want %s", tool, args, e.Error.Code, e.Error.Message, code)
	}
	return e.Error.Details
}

// attempt calls tool and returns its error code and details, or "" and the
// result on success, for a case that must tell a race from a bug.
func (s *suite) attempt(t *testing.T, tool string, args map[string]any) (code string, details map[string]any, res Result) {
	t.Helper()
	res = s.call(t, tool, args)
	if !res.IsError {
		return "", nil, res
	}
	var e errorBody
	_ = json.Unmarshal(res.Structured, &e) // call checked its shape
	return e.Error.Code, e.Error.Details, res
}

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}
