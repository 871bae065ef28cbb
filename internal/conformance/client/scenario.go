package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/plexus-gw/plexus"
)

// plan is what the owner and the agent do for a scenario.
type plan struct {
	// grant is the --oauth-grant the owner gives (client_credentials for
	// the scenarios whose server's client signs in with no person); empty
	// is the default, authorization_code.
	grant string
	// signIn: the server wants the owner to sign in (`mcp login`).
	signIn bool
	// play is what the agent calls once the server is listed.
	play func(ctx context.Context, a *agent, sc scenarioContext) error
}

// planFor is the plan of a scenario, modelled on the Go SDK's conformance
// client (conformance/everything-client): every auth scenario signs in and
// then lists and calls test-tool; the others call what the scenario's
// server checks. A scenario it does not know is connected to and listed.
func planFor(scenario string) plan {
	switch scenario {
	case "auth/client-credentials-basic", "auth/client-credentials-jwt":
		return plan{grant: "client_credentials", play: callTestTool}
	}
	if strings.HasPrefix(scenario, "auth/") {
		return plan{signIn: true, play: callTestTool}
	}
	return plan{play: playOf(scenario)}
}

// playOf is what the agent calls in a scenario outside auth.
func playOf(scenario string) func(context.Context, *agent, scenarioContext) error {
	switch scenario {
	case "tools_call":
		return callTool("add_numbers", map[string]any{"a": 5, "b": 3})
	case "elicitation-sep1034-client-defaults":
		return callTool("test_client_elicitation_defaults", nil)
	case "sse-retry":
		return callTool("test_reconnection", nil)
	case "json-schema-2020-12-preservation":
		return echoSchema
	case "sep-2322-client-request-state":
		return callEach("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type")
	case "http-standard-headers":
		return callFirstOfEach
	case "http-custom-headers":
		return callContextTools
	case "http-invalid-tool-headers":
		return callEveryTool(map[string]any{"region": "us-west1"})
	case "sep-2640-client-no-prefetch":
		return discoverSkills
	case "sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter":
		return loadSkills
	}
	return listOnly
}

// listOnly: the daemon's session (initialize, the lists) is what the
// scenario checks; the agent's handshake has shown its entries.
func listOnly(context.Context, *agent, scenarioContext) error { return nil }

func callTool(name string, args map[string]any) func(context.Context, *agent, scenarioContext) error {
	return func(ctx context.Context, a *agent, _ scenarioContext) error {
		_, err := a.callTool(ctx, name, args)
		return err
	}
}

// signInsMax is how many times the owner signs in to one server in a
// scenario: a server asking again (a step-up to more scopes) gets a new
// sign-in, three in all at most, as an owner would not go on for ever.
const signInsMax = 3

// callTestTool is every auth scenario's call: the server's test-tool. When
// the call finds the server needing sign-in again (it asked for more
// scopes), the owner signs in again and the agent calls again.
func callTestTool(ctx context.Context, a *agent, _ scenarioContext) error {
	for {
		_, err := a.callTool(ctx, "test-tool", nil)
		if err == nil || a.d.signIns >= signInsMax {
			return err
		}
		needs, lerr := a.d.needsSignIn(ctx)
		if lerr != nil || !needs {
			return errors.Join(err, lerr)
		}
		if err := a.d.signInAgain(ctx); err != nil {
			return err
		}
	}
}

// callEach calls each tool in turn, whatever each answers: the scenario's
// server judges the requests.
func callEach(names ...string) func(context.Context, *agent, scenarioContext) error {
	return func(ctx context.Context, a *agent, _ scenarioContext) error {
		var errs []error
		for _, n := range names {
			if _, err := a.callTool(ctx, n, nil); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// callEveryTool calls every tool Plexus shows with args (a tool the
// client should have left out is never called).
func callEveryTool(args map[string]any) func(context.Context, *agent, scenarioContext) error {
	return func(ctx context.Context, a *agent, _ scenarioContext) error {
		for _, e := range a.of("tool") {
			if _, err := a.call(ctx, e.ID, args); err != nil {
				log.Printf("%s: %v", e.MCP.OriginName, err)
			}
		}
		return nil
	}
}

// callFirstOfEach calls the first tool, reads the first resource and gets
// the first prompt, so that the server sees each method's request.
func callFirstOfEach(ctx context.Context, a *agent, _ scenarioContext) error {
	for _, primitive := range []string{"tool", "resource", "prompt"} {
		if es := a.of(primitive); len(es) > 0 {
			if _, err := a.call(ctx, es[0].ID, nil); err != nil {
				log.Printf("%s %s: %v", primitive, es[0].MCP.OriginName, err)
			}
		}
	}
	return nil
}

// callContextTools makes the calls the scenario's context lists.
func callContextTools(ctx context.Context, a *agent, sc scenarioContext) error {
	if len(sc.ToolCalls) == 0 {
		return errors.New("the scenario's context lists no toolCalls")
	}
	for _, c := range sc.ToolCalls {
		if _, err := a.callTool(ctx, c.Name, c.Arguments); err != nil {
			log.Printf("%s: %v", c.Name, err)
		}
	}
	return nil
}

// echoSchema sends the focal tool's input schema, as Plexus shows it to
// the agent, back to the server through its echo tool: the server checks
// that no 2020-12 keyword was lost on the way.
func echoSchema(ctx context.Context, a *agent, _ scenarioContext) error {
	focal := a.find("tool", "json_schema_2020_12_tool")
	if focal == nil || focal.IO == nil {
		return errors.New("the agent is shown no tool json_schema_2020_12_tool with a schema")
	}
	var schema any
	if err := json.Unmarshal(focal.IO.Input, &schema); err != nil {
		return fmt.Errorf("the focal tool's schema: %w", err)
	}
	_, err := a.callTool(ctx, "json_schema_echo", map[string]any{"schema": schema})
	return err
}

// discoverSkills: the agent finds the server's skills in its manifest and
// loads none (the server checks that no skill file was read).
func discoverSkills(_ context.Context, a *agent, _ scenarioContext) error {
	skills := a.of("skill")
	if len(skills) == 0 {
		return errors.New("the agent is shown no skill")
	}
	for _, e := range skills {
		log.Printf("skill %s: %s", e.ID, e.Describe)
	}
	return nil
}

// loadSkills loads each skill the agent is shown (its SKILL.md) and, only
// when that succeeded, reads the skill's other files, as an agent acting
// on it would. A load Plexus refuses is what the verify scenarios expect:
// the server checks that no other file was read after it.
func loadSkills(ctx context.Context, a *agent, _ scenarioContext) error {
	skills := a.of("skill")
	if len(skills) == 0 {
		return errors.New("the agent is shown no skill")
	}
	for _, e := range skills {
		if _, err := a.call(ctx, e.ID, nil); err != nil {
			log.Printf("skill %s not loaded: %v", e.ID, err)
			continue
		}
		files, err := skillFiles(e)
		if err != nil {
			return err
		}
		for _, f := range files {
			if f == "SKILL.md" {
				continue
			}
			if _, err := a.call(ctx, e.ID, map[string]any{"file": f}); err != nil {
				log.Printf("skill %s: %s: %v", e.ID, f, err)
			}
		}
	}
	return nil
}

// skillFiles are the files of a skill entry, as its io.input lists them.
func skillFiles(e plexus.Entry) ([]string, error) {
	var in struct {
		Properties struct {
			File struct {
				Enum []string `json:"enum"`
			} `json:"file"`
		} `json:"properties"`
	}
	if e.IO == nil {
		return nil, fmt.Errorf("the skill %s has no io.input", e.ID)
	}
	if err := json.Unmarshal(e.IO.Input, &in); err != nil {
		return nil, fmt.Errorf("the skill %s's io.input: %w", e.ID, err)
	}
	return in.Properties.File.Enum, nil
}
