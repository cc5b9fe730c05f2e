package opa

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
)

// ToolCallInput builds the Rego input document data.turngate.tool_call sees
// for tc (what `turngate eval` shows). INPUT.md documents it; in short:
//
//	tool.name         string   the called tool's name
//	tool.kind         string   "http", "mcp", "agent", "client" or "builtin"
//	tool.server       string   the MCP server or sub-agent behind the tool ("" if none)
//	tool.description  string   the tool's description as offered to the model
//	tool.dynamic      bool     a runtime-registered tool
//	tool.input        any      the input the model emitted (an object; {} if empty)
//	tool.schema       object   the tool's input JSON Schema (null if none)
//	call_id           string   the tool call id
//	step_number       number   the zero-based step the call belongs to
//	agent             string   the agent the turn runs
//	session_id        string   the session
//	request_id        string   the request that started the turn
//	entry_path        string   how the turn started ("chat", "saveMessages", …)
//	depth             number   sub-agent nesting depth (0 at top level)
//	principal         object   {tenant, subject, roles} of the authenticated caller
//	body              object   the client request's custom body fields ({} if none)
//	previous_calls    array    this turn's earlier calls, in order:
//	                           {tool, call_id, input, decision, success, step_number}
//	messages_count    number   how many messages the model has seen
//
// A model input that is not valid JSON appears as null; evaluating such a
// call fails with CodeValidation.
func ToolCallInput(tc *engine.ToolCallContext) map[string]any {
	in, _ := toolCallInput(tc)
	return in
}

func toolCallInput(tc *engine.ToolCallContext) (map[string]any, error) {
	in := identityDoc(&tc.Identity, 14)
	tool, err := toolDoc(tc.ToolName, &tc.Tool, tc.Dynamic, tc.Input)
	in["tool"] = tool
	in["call_id"] = tc.ToolCallID
	in["step_number"] = tc.StepNumber
	in["messages_count"] = len(tc.Messages)
	body := tc.Body
	if body == nil {
		body = map[string]any{}
	}
	in["body"] = body
	prev := make([]any, len(tc.PreviousCalls))
	for i, pc := range tc.PreviousCalls {
		pin, perr := decodeJSON(pc.Input, map[string]any{})
		if perr != nil && err == nil {
			err = fmt.Errorf("previous call %s input: %w", pc.ToolCallID, perr)
		}
		prev[i] = map[string]any{
			"tool":        pc.ToolName,
			"call_id":     pc.ToolCallID,
			"input":       pin,
			"decision":    pc.Decision,
			"success":     pc.Success,
			"step_number": pc.StepNumber,
		}
	}
	in["previous_calls"] = prev
	return in, err
}

// ToolResultInput builds the Rego input document data.turngate.tool_result
// sees for rc. It has the tool-call fields that exist after execution (tool,
// call_id, step_number, agent, session_id, request_id, entry_path, depth,
// principal, messages_count; no body or previous_calls) plus:
//
//	output            any      the tool's output (null when it failed or returned nothing)
//	success           bool     whether the call succeeded
//	error             string   the error text when it failed ("" otherwise)
//	decision          string   "allow", "rewrite", "block", "substitute", "error" or "client"
//	executed          bool     whether the tool's executor ran
//	effective_input   any      the input the tool ran with (null if not rewritten)
//	duration_ms       number   execution time in milliseconds
//
// Invalid JSON in a field appears as null; evaluating fails with
// CodeValidation.
func ToolResultInput(rc *engine.ToolCallResultContext) map[string]any {
	in, _ := toolResultInput(rc)
	return in
}

func toolResultInput(rc *engine.ToolCallResultContext) (map[string]any, error) {
	in := identityDoc(&rc.Identity, 17)
	tool, err := toolDoc(rc.ToolName, &rc.Tool, rc.Dynamic, rc.Input)
	in["tool"] = tool
	in["call_id"] = rc.ToolCallID
	in["step_number"] = rc.StepNumber
	in["messages_count"] = len(rc.Messages)
	out, oerr := decodeJSON(rc.Output, nil)
	eff, eerr := decodeJSON(rc.EffectiveInput, nil)
	in["output"] = out
	in["effective_input"] = eff
	in["success"] = rc.Success
	in["error"] = rc.Error
	in["decision"] = rc.Decision
	in["executed"] = rc.Executed
	in["duration_ms"] = rc.DurationMs
	for _, e := range []struct {
		what string
		err  error
	}{{"output", oerr}, {"effective input", eerr}} {
		if e.err != nil && err == nil {
			err = fmt.Errorf("%s: %w", e.what, e.err)
		}
	}
	return in, err
}

// identityDoc starts an input document with the turn's identity; size is the
// expected number of fields.
func identityDoc(id *engine.Identity, size int) map[string]any {
	roles := id.Principal.Roles
	if roles == nil {
		roles = []string{}
	}
	in := make(map[string]any, size)
	in["agent"] = id.Agent
	in["session_id"] = id.SessionID
	in["request_id"] = id.RequestID
	in["entry_path"] = id.EntryPath
	in["depth"] = id.Depth
	in["principal"] = map[string]any{
		"tenant":  id.Principal.Tenant,
		"subject": id.Principal.Subject,
		"roles":   roles,
	}
	return in
}

// toolDoc is input.tool: the tool's description plus the model's input.
func toolDoc(name string, info *engine.ToolInfo, dynamic bool, input json.RawMessage) (map[string]any, error) {
	if name == "" {
		name = info.Name
	}
	in, err := decodeJSON(input, map[string]any{})
	if err != nil {
		err = fmt.Errorf("tool call input: %w", err)
	}
	schema, serr := decodeJSON(info.InputSchema, nil)
	if serr != nil && err == nil {
		err = fmt.Errorf("tool input schema: %w", serr)
	}
	return map[string]any{
		"name":        name,
		"kind":        info.Kind,
		"server":      info.Server,
		"description": info.Description,
		"dynamic":     dynamic || info.Dynamic,
		"input":       in,
		"schema":      schema,
	}, err
}

// decodeJSON decodes raw keeping numbers exact; empty raw yields empty.
func decodeJSON(raw json.RawMessage, empty any) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return empty, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: trailing data after the value")
	}
	return v, nil
}
