package opa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/engine"
)

// ToolCallInput returns the Rego input document data.turngate.tool_call sees
// for tc, as JSON-shaped Go values (what `turngate eval` shows). INPUT.md
// documents it; in short:
//
//	tool.name         string   the called tool's name
//	tool.kind         string   "http", "mcp", "agent", "client" or "builtin"
//	tool.server       string   the MCP server or sub-agent behind the tool ("" if none)
//	tool.description  string   the tool's description as offered to the model
//	tool.dynamic      bool     a runtime-registered tool
//	tool.input        any      the input the model emitted (an object; {} if empty)
//	tool.schema       object   the tool's input JSON Schema (null if none)
//	toolCallId           string   the tool call id
//	stepNumber       number   the zero-based step the call belongs to
//	agent             string   the agent the turn runs
//	sessionId        string   the session
//	requestId        string   the request that started the turn
//	entryPath        string   how the turn started ("chat", "saveMessages", …)
//	depth             number   sub-agent nesting depth (0 at top level)
//	deadline          string   when the turn's time runs out, RFC 3339 ("" if none)
//	aborted           bool     the turn's abort signal had fired
//	principal         object   {tenant, subject, roles} of the authenticated caller
//	body              object   the client request's custom body fields ({} if none)
//	previousCalls    array    this turn's earlier calls, in order:
//	                           {toolName, toolCallId, input, decision, success, stepNumber}
//	messagesCount    number   how many messages the model has seen
//	attachments      array    the files of the turn's last user message:
//	                           {mediaType, filename, size, remote, url}
//
// A field holding invalid JSON appears as null; evaluating such a call fails
// with CodeValidation.
func ToolCallInput(tc *engine.ToolCallContext) map[string]any {
	v, _ := toolCallInput(tc, nil, nil)
	return goValue(v)
}

// ToolResultInput returns the Rego input document data.turngate.tool_result
// sees for rc. It has the tool-call fields that exist after execution (tool,
// toolCallId, stepNumber, agent, sessionId, requestId, entryPath, depth,
// deadline, aborted,
// principal, messagesCount; no body or previousCalls) plus:
//
//	output            any      the tool's output (null when it failed or returned nothing)
//	success           bool     whether the call succeeded
//	error             string   the error text when it failed ("" otherwise)
//	decision          string   "allow", "rewrite", "block", "substitute", "error", "client", "approval" or "denied"
//	executed          bool     whether the tool's executor ran
//	effectiveInput   any      the input the tool ran with (null if not rewritten)
//	durationMs       number   execution time in milliseconds
//
// A field holding invalid JSON appears as null; evaluating fails with
// CodeValidation.
func ToolResultInput(rc *engine.ToolCallResultContext) map[string]any {
	v, _ := toolResultInput(rc, nil, nil)
	return goValue(v)
}

func goValue(v ast.Value) map[string]any {
	x, err := ast.JSON(v)
	if err != nil {
		return nil // unreachable: the builders produce JSON values only
	}
	m, _ := x.(map[string]any)
	return m
}

// The input documents are built as ast values directly: converting Go maps
// with ast.InterfaceToValue would double the work on every decision.

// The builders note in raws (when not nil) the terms they parsed from
// JSON the gateway holds, so a decision record copies those bytes instead
// of rendering the terms again (renderInput).

func toolCallInput(tc *engine.ToolCallContext, schemas *schemaCache, raws *rawTerms) (ast.Value, error) {
	var errs []error
	prev := make([]*ast.Term, len(tc.PreviousCalls))
	for i, pc := range tc.PreviousCalls {
		pin, err := raws.json(pc.Input, emptyObject)
		if err != nil {
			errs = append(errs, fmt.Errorf("previous call %s input: %w", pc.ToolCallID, err))
		}
		prev[i] = ast.ObjectTerm(
			ast.Item(inputKey.toolName, ast.StringTerm(pc.ToolName)),
			ast.Item(inputKey.callID, ast.StringTerm(pc.ToolCallID)),
			ast.Item(inputKey.input, pin),
			ast.Item(inputKey.decision, ast.StringTerm(pc.Decision)),
			ast.Item(inputKey.success, ast.InternedTerm(pc.Success)),
			ast.Item(inputKey.stepNumber, ast.InternedTerm(pc.StepNumber)),
		)
	}
	body := emptyObject
	if len(tc.Body) > 0 {
		v, err := ast.InterfaceToValue(tc.Body)
		if err != nil {
			errs = append(errs, fmt.Errorf("body: %w", err))
		} else {
			body = ast.NewTerm(v)
		}
	}
	tool, err := toolTerm(tc.ToolName, &tc.Tool, tc.Dynamic, tc.Input, schemas, raws)
	errs = append(errs, err)
	items := append(callItems(&tc.Identity, tool, tc.ToolCallID, tc.StepNumber, len(tc.Messages)),
		ast.Item(inputKey.body, body),
		ast.Item(inputKey.previousCalls, ast.ArrayTerm(prev...)),
		ast.Item(inputKey.attachments, attachmentsTerm(tc.Attachments)),
	)
	if tc.State != nil {
		st, err := stateTerm(tc.State)
		errs = append(errs, err)
		items = append(items, ast.Item(inputKey.state, st))
	}
	return ast.NewObject(items...), errors.Join(errs...)
}

func toolResultInput(rc *engine.ToolCallResultContext, schemas *schemaCache, raws *rawTerms) (ast.Value, error) {
	tool, terr := toolTerm(rc.ToolName, &rc.Tool, rc.Dynamic, rc.Input, schemas, raws)
	out, oerr := raws.json(rc.Output, ast.NullTerm())
	if oerr != nil {
		oerr = fmt.Errorf("output: %w", oerr)
	}
	eff, eerr := raws.json(rc.EffectiveInput, ast.NullTerm())
	if eerr != nil {
		eerr = fmt.Errorf("effective input: %w", eerr)
	}
	items := append(callItems(&rc.Identity, tool, rc.ToolCallID, rc.StepNumber, len(rc.Messages)),
		ast.Item(inputKey.output, out),
		ast.Item(inputKey.effectiveInput, eff),
		ast.Item(inputKey.success, ast.InternedTerm(rc.Success)),
		ast.Item(inputKey.error, ast.StringTerm(rc.Error)),
		ast.Item(inputKey.decision, ast.StringTerm(rc.Decision)),
		ast.Item(inputKey.executed, ast.InternedTerm(rc.Executed)),
		ast.Item(inputKey.durationMs, ast.FloatNumberTerm(rc.DurationMs)),
	)
	var serr error
	if rc.State != nil {
		var st *ast.Term
		st, serr = stateTerm(rc.State)
		items = append(items, ast.Item(inputKey.state, st))
	}
	return ast.NewObject(items...), errors.Join(terr, oerr, eerr, serr)
}

var emptyObject = ast.ObjectTerm()

// stateTerm is input.state: the declared state values read for the event.
func stateTerm(vals map[string]any) (*ast.Term, error) {
	v, err := ast.InterfaceToValue(vals)
	if err != nil {
		return emptyObject, fmt.Errorf("state: %w", err)
	}
	return ast.NewTerm(v), nil
}

// attachmentsTerm is the input's attachments array.
func attachmentsTerm(as []engine.Attachment) *ast.Term {
	terms := make([]*ast.Term, len(as))
	for i, a := range as {
		terms[i] = ast.ObjectTerm(
			ast.Item(inputKey.mediaType, ast.StringTerm(a.MediaType)),
			ast.Item(inputKey.filename, ast.StringTerm(a.Filename)),
			ast.Item(inputKey.size, ast.InternedTerm(int(a.Size))),
			ast.Item(inputKey.remote, ast.InternedTerm(a.Remote)),
			ast.Item(inputKey.url, ast.StringTerm(a.URL)),
		)
	}
	return ast.ArrayTerm(terms...)
}

// inputKey holds the input documents' key terms, built once: ast terms are
// immutable, so every evaluation shares them.
var inputKey = struct {
	agent          *ast.Term
	sessionID      *ast.Term
	requestID      *ast.Term
	entryPath      *ast.Term
	depth          *ast.Term
	deadline       *ast.Term
	aborted        *ast.Term
	principal      *ast.Term
	tenant         *ast.Term
	subject        *ast.Term
	roles          *ast.Term
	tool           *ast.Term
	toolName       *ast.Term
	name           *ast.Term
	kind           *ast.Term
	server         *ast.Term
	description    *ast.Term
	dynamic        *ast.Term
	input          *ast.Term
	schema         *ast.Term
	callID         *ast.Term
	stepNumber     *ast.Term
	messagesCount  *ast.Term
	body           *ast.Term
	previousCalls  *ast.Term
	decision       *ast.Term
	success        *ast.Term
	output         *ast.Term
	effectiveInput *ast.Term
	error          *ast.Term
	executed       *ast.Term
	durationMs     *ast.Term
	attachments    *ast.Term
	mediaType      *ast.Term
	filename       *ast.Term
	size           *ast.Term
	remote         *ast.Term
	url            *ast.Term
	state          *ast.Term
}{
	agent:          ast.StringTerm("agent"),
	sessionID:      ast.StringTerm("sessionId"),
	requestID:      ast.StringTerm("requestId"),
	entryPath:      ast.StringTerm("entryPath"),
	depth:          ast.StringTerm("depth"),
	deadline:       ast.StringTerm("deadline"),
	aborted:        ast.StringTerm("aborted"),
	principal:      ast.StringTerm("principal"),
	tenant:         ast.StringTerm("tenant"),
	subject:        ast.StringTerm("subject"),
	roles:          ast.StringTerm("roles"),
	tool:           ast.StringTerm("tool"),
	toolName:       ast.StringTerm("toolName"),
	name:           ast.StringTerm("name"),
	kind:           ast.StringTerm("kind"),
	server:         ast.StringTerm("server"),
	description:    ast.StringTerm("description"),
	dynamic:        ast.StringTerm("dynamic"),
	input:          ast.StringTerm("input"),
	schema:         ast.StringTerm("schema"),
	callID:         ast.StringTerm("toolCallId"),
	stepNumber:     ast.StringTerm("stepNumber"),
	messagesCount:  ast.StringTerm("messagesCount"),
	body:           ast.StringTerm("body"),
	previousCalls:  ast.StringTerm("previousCalls"),
	decision:       ast.StringTerm("decision"),
	success:        ast.StringTerm("success"),
	output:         ast.StringTerm("output"),
	effectiveInput: ast.StringTerm("effectiveInput"),
	error:          ast.StringTerm("error"),
	executed:       ast.StringTerm("executed"),
	durationMs:     ast.StringTerm("durationMs"),
	attachments:    ast.StringTerm("attachments"),
	mediaType:      ast.StringTerm("mediaType"),
	filename:       ast.StringTerm("filename"),
	size:           ast.StringTerm("size"),
	remote:         ast.StringTerm("remote"),
	url:            ast.StringTerm("url"),
	state:          ast.StringTerm("state"),
}

// callItems are the fields both input documents have: the turn's identity,
// the tool, toolCallId, stepNumber and messagesCount, with room for the rest
// of a document.
func callItems(id *engine.Identity, tool *ast.Term, callID string, step, messages int) [][2]*ast.Term {
	roles := make([]*ast.Term, len(id.Principal.Roles))
	for i, r := range id.Principal.Roles {
		roles[i] = ast.StringTerm(r)
	}
	deadline := ""
	if !id.Deadline.IsZero() {
		deadline = id.Deadline.UTC().Format(time.RFC3339Nano)
	}
	items := make([][2]*ast.Term, 0, 19)
	return append(items,
		ast.Item(inputKey.agent, ast.StringTerm(id.Agent)),
		ast.Item(inputKey.sessionID, ast.StringTerm(id.SessionID)),
		ast.Item(inputKey.requestID, ast.StringTerm(id.RequestID)),
		ast.Item(inputKey.entryPath, ast.StringTerm(id.EntryPath)),
		ast.Item(inputKey.depth, ast.InternedTerm(id.Depth)),
		ast.Item(inputKey.deadline, ast.StringTerm(deadline)),
		ast.Item(inputKey.aborted, ast.InternedTerm(id.Aborted)),
		ast.Item(inputKey.principal, ast.ObjectTerm(
			ast.Item(inputKey.tenant, ast.StringTerm(id.Principal.Tenant)),
			ast.Item(inputKey.subject, ast.StringTerm(id.Principal.Subject)),
			ast.Item(inputKey.roles, ast.ArrayTerm(roles...)),
		)),
		ast.Item(inputKey.tool, tool),
		ast.Item(inputKey.callID, ast.StringTerm(callID)),
		ast.Item(inputKey.stepNumber, ast.InternedTerm(step)),
		ast.Item(inputKey.messagesCount, ast.InternedTerm(messages)),
	)
}

// toolTerm is input.tool: the tool's description plus the model's input.
func toolTerm(name string, info *engine.ToolInfo, dynamic bool, input json.RawMessage, schemas *schemaCache, raws *rawTerms) (*ast.Term, error) {
	if name == "" {
		name = info.Name
	}
	in, err := raws.json(input, emptyObject)
	if err != nil {
		err = fmt.Errorf("tool call input: %w", err)
	}
	schema, serr := schemas.get(info.InputSchema)
	if serr != nil {
		err = errors.Join(err, fmt.Errorf("tool input schema: %w", serr))
	} else {
		raws.note(schema, info.InputSchema)
	}
	return ast.ObjectTerm(
		ast.Item(inputKey.name, ast.StringTerm(name)),
		ast.Item(inputKey.kind, ast.StringTerm(info.Kind)),
		ast.Item(inputKey.server, ast.StringTerm(info.Server)),
		ast.Item(inputKey.description, ast.StringTerm(info.Description)),
		ast.Item(inputKey.dynamic, ast.InternedTerm(dynamic || info.Dynamic)),
		ast.Item(inputKey.input, in),
		ast.Item(inputKey.schema, schema),
	), err
}

// jsonTerm converts raw JSON (numbers kept exact) to a term; empty raw
// yields empty, invalid JSON yields null and an error.
func jsonTerm(raw json.RawMessage, empty *ast.Term) (*ast.Term, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return empty, nil
	}
	if json.Valid(raw) {
		t, ok, err := parseJSONTerm(raw)
		if err != nil {
			return ast.NullTerm(), err
		}
		if ok {
			return t, nil
		}
	}
	x, err := decodeJSON(raw, nil)
	if err != nil {
		return ast.NullTerm(), err
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		return ast.NullTerm(), err
	}
	return ast.NewTerm(v), nil
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

// maxCachedSchemas bounds a Policy's schema cache. A gateway offers tens of
// tools; the bound only guards against tool sets generated per request.
const maxCachedSchemas = 512

// schemaCache memoises converted tool input schemas: a tool's schema is the
// largest part of every input document and rarely changes. A nil cache
// converts every time.
type schemaCache struct {
	mu sync.RWMutex
	m  map[string]*ast.Term
}

func (c *schemaCache) get(raw json.RawMessage) (*ast.Term, error) {
	if c == nil {
		return jsonTerm(raw, ast.NullTerm())
	}
	c.mu.RLock()
	t, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return t, nil
	}
	t, err := jsonTerm(raw, ast.NullTerm())
	if err != nil {
		return t, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = make(map[string]*ast.Term)
	}
	c.m[string(raw)] = t
	c.mu.Unlock()
	return t, nil
}
