package planexe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SpecVersion is the PlanExe MCP interface version this server implements
// (§16.1 "planexe.version"). It is the server's MCP implementation version
// and is also advertised as capabilities.experimental.planexe.version.
const SpecVersion = "1.0"

// The tool names of §6 and §7.1.
const (
	ToolSessionCreate = "planexe.session.create"
	ToolSessionStart  = "planexe.session.start"
	ToolSessionStatus = "planexe.session.status"
	ToolSessionStop   = "planexe.session.stop"
	ToolSessionResume = "planexe.session.resume"
	ToolSessionEvents = "planexe.session.events"
	ToolArtifactList  = "planexe.artifact.list"
	ToolArtifactRead  = "planexe.artifact.read"
	ToolArtifactWrite = "planexe.artifact.write"
)

// NewServer returns an MCP server whose tools call e. The server holds no
// state of its own: any number of MCP sessions (stdio, or one per HTTP
// client) may share it and e. Closing e is the caller's job.
func NewServer(e *Engine) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "planexe", Title: "PlanExe (deterministic stand-in)", Version: SpecVersion},
		&mcp.ServerOptions{
			Instructions: "PlanExe MCP interface v" + SpecVersion + ". Create a session, start a target, poll " +
				"planexe.session.status or planexe.session.events, read artifacts; to change a result: stop, " +
				"read, write with lock.expected_sha256, resume. Failed calls return isError with " +
				`structuredContent {"error":{"code","message","details"}}.`,
			Capabilities: &mcp.ServerCapabilities{
				Tools:        &mcp.ToolCapabilities{},
				Experimental: map[string]any{"planexe": map[string]any{"version": SpecVersion}},
			},
		})
	// The hints say what a gateway should ask before a call (Plexus: read
	// for readOnlyHint, execute for an explicit destructiveHint, write for
	// the rest). A run regenerates the session's artifacts and spends
	// compute: destructive. Creating, stopping and a locked artifact write
	// change state without destroying what was not asked for: not.
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	no, yes := false, true
	changes := &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}
	runs := &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}
	targets := func(props ...string) func(*jsonschema.Schema) {
		return func(sc *jsonschema.Schema) {
			for _, p := range props {
				sc.Properties[p].Enum = []any{TargetBuildPlan, TargetValidatePlan, TargetBuildPlanAndValidate}
			}
		}
	}
	addTool(s, e, &mcp.Tool{Name: ToolSessionCreate, Title: "Create a PlanExe session", Annotations: changes,
		Description: "Creates a session and its output namespace (spec §6.1). config is immutable afterwards; " +
			"client_request_id makes the call idempotent."},
		e.Create, nil)
	addTool(s, e, &mcp.Tool{Name: ToolSessionStart, Title: "Start a run", Annotations: runs,
		Description: "Starts the first run of a session for a target and returns at once; poll status or events " +
			"(§6.2). Fails with RUN_ALREADY_ACTIVE while a run is running, and with CONFLICT once the session has " +
			"runs (use resume)."},
		e.Start, targets("target"))
	addTool(s, e, &mcp.Tool{Name: ToolSessionStatus, Title: "Run status and progress", Annotations: readOnly,
		Description: "Returns the latest run's state, phase and progress (§6.3). progress.overall is within [0,1]; " +
			"phases: initializing, generating_plan, validating, exporting, finalizing."},
		e.Status, nil)
	addTool(s, e, &mcp.Tool{Name: ToolSessionStop, Title: "Stop the running run", Annotations: changes,
		Description: "Stops the running run and returns once it has stopped (§6.4). mode graceful finishes the " +
			"current task, immediate abandons it; completed outputs are kept for resume."},
		e.Stop, func(sc *jsonschema.Schema) { sc.Properties["mode"].Enum = []any{"graceful", "immediate"} })
	addTool(s, e, &mcp.Tool{Name: ToolSessionResume, Title: "Resume incrementally", Annotations: runs,
		Description: "Starts a new run that reuses every up-to-date output and recomputes only what is stale: tasks " +
			"downstream of edited or invalidated artifacts, invalidated tasks, missing outputs (§6.5, §9)."},
		e.Resume, func(sc *jsonschema.Schema) {
			targets("target")(sc)
			sc.Properties["resume_policy"].Enum = []any{defaultResumePolicy}
		})
	addTool(s, e, &mcp.Tool{Name: ToolSessionEvents, Title: "Events since a cursor", Annotations: readOnly,
		Description: "Returns the session's events after the cursor since (§7.1), oldest first, at most 500 per " +
			"call; pass the returned cursor next time. wait_ms long-polls."},
		e.Events, nil)
	addTool(s, e, &mcp.Tool{Name: ToolArtifactList, Title: "List artifacts", Annotations: readOnly,
		Description: "Lists one folder of the session's output namespace (§6.6) with size, sha256, kind and " +
			"content type."},
		e.List, nil)
	addTool(s, e, &mcp.Tool{Name: ToolArtifactRead, Title: "Read an artifact", Annotations: readOnly,
		Description: "Reads an artifact or a byte range of it (§6.7). sha256 is always the whole artifact's, for " +
			"a locked write."},
		e.Read, nil)
	addTool(s, e, &mcp.Tool{Name: ToolArtifactWrite, Title: "Write an artifact", Annotations: changes,
		Description: "Writes an artifact (§6.8): refused with RUNNING_READONLY while a run is running, and with " +
			"CONFLICT when lock.expected_sha256 is not the artifact's current sha256. Resume then recomputes what " +
			"depends on it."},
		e.Write, nil)
	return s
}

// addTool registers one tool. It does not use the SDK's typed AddTool: that
// validates arguments against the input schema before the handler runs and
// answers failures with bare text, whereas every failure here must carry a
// spec error code (a bad target is INVALID_TARGET, not a schema error). So
// the schemas are advertised, and the engine does the validating.
func addTool[In, Out any](s *mcp.Server, e *Engine, t *mcp.Tool,
	call func(context.Context, string, In) (Out, error), tweak func(*jsonschema.Schema)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("planexe: input schema of %s: %v", t.Name, err))
	}
	// Unknown arguments are ignored, not refused (§16.2 forward
	// compatibility), so the schema must not claim otherwise.
	openObjects(in)
	if tweak != nil {
		tweak(in)
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("planexe: output schema of %s: %v", t.Name, err))
	}
	t.InputSchema, t.OutputSchema = in, out
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args In
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return e.errorResult(t.Name, newError(CodeInvalidArgument, nil, "arguments do not match the input schema: %v", err)), nil
			}
		}
		res, err := call(ctx, callerIdentity(req), args)
		if err != nil {
			return e.errorResult(t.Name, err), nil
		}
		body, err := json.Marshal(res)
		if err != nil {
			return e.errorResult(t.Name, internalError("encode the result", err)), nil
		}
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(body),
			Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
		}, nil
	})
}

// openObjects drops the "additionalProperties": false that schema inference
// puts on every struct.
func openObjects(sc *jsonschema.Schema) {
	if sc == nil {
		return
	}
	sc.AdditionalProperties = nil
	for _, p := range sc.Properties {
		openObjects(p)
	}
	openObjects(sc.Items)
}

// callerIdentity is the identity a call asserts in _meta (see [MetaUserID]).
func callerIdentity(req *mcp.CallToolRequest) string {
	if req.Params == nil || req.Params.Meta == nil {
		return ""
	}
	id, _ := req.Params.Meta[MetaUserID].(string)
	return id
}

// wireError is the error object of §11.
type wireError struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// errorResult renders a refused call as a tool result with isError set and
// structuredContent {"error": {...}} (§11), plus the same JSON as text for
// clients that read only content. A tool error, not a JSON-RPC error: the
// call reached the tool, and the model or UI on the other side should see
// the code.
func (e *Engine) errorResult(tool string, err error) *mcp.CallToolResult {
	var pe *Error
	if !errors.As(err, &pe) {
		pe = internalError("handle the call", err)
	}
	if pe.Code == CodeInternal && pe.Err != nil {
		e.opts.Logger.Error("planexe: internal error", "tool", tool, "err", pe.Err)
	}
	body, mErr := json.Marshal(map[string]wireError{"error": {Code: pe.Code, Message: pe.Message, Details: pe.Details}})
	if mErr != nil {
		body = []byte(`{"error":{"code":"INTERNAL_ERROR","message":"unencodable error"}}`)
	}
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(body),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
	}
}
