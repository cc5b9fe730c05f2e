package opa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/engine"
)

// A decision record carries the input document its rules evaluated (as
// JSON, keys sorted), so `turngate eval` and `turngate replay` can evaluate
// the same document again. The functions here render that JSON and turn
// it back into the hook context that builds it.

// InputJSON returns the input document the evaluation saw as JSON with its
// object keys sorted; nil when the input could not be built.
func (t Trace) InputJSON() json.RawMessage {
	if t.input == nil {
		return nil
	}
	b, err := renderInput(t.input, t.raws)
	if err != nil {
		return nil
	}
	return b
}

// ToolCallInputJSON is ToolCallInput as JSON with its keys sorted, the
// rendering decision records carry.
func ToolCallInputJSON(tc *engine.ToolCallContext) (json.RawMessage, error) {
	var raws rawTerms
	v, err := toolCallInput(tc, nil, &raws)
	if err != nil {
		return nil, err
	}
	return renderInput(v, raws)
}

// ToolResultInputJSON is ToolResultInput as JSON with its keys sorted.
func ToolResultInputJSON(rc *engine.ToolCallResultContext) (json.RawMessage, error) {
	var raws rawTerms
	v, err := toolResultInput(rc, nil, &raws)
	if err != nil {
		return nil, err
	}
	return renderInput(v, raws)
}

// maxPooledJSON is the largest scratch buffer renderInput keeps for
// reuse; an input with a large tool output would pin more.
const maxPooledJSON = 64 << 10

var jsonScratch = sync.Pool{New: func() any { return new([]byte) }}

// renderInput renders v with appendJSON into a pooled scratch buffer and
// returns an exact-size copy: one allocation per input document instead
// of one per growth of the buffer. A term noted in raws is the JSON it was
// parsed from, compacted (its keys in the order they came in), not
// rendered again.
func renderInput(v ast.Value, raws rawTerms) (json.RawMessage, error) {
	scratch := jsonScratch.Get().(*[]byte)
	b, err := appendJSON((*scratch)[:0], v, raws)
	out := json.RawMessage(bytes.Clone(b))
	if cap(b) <= maxPooledJSON {
		*scratch = b
		jsonScratch.Put(scratch)
	}
	return out, err
}

// appendJSON appends the JSON of v, a value made of JSON types only, to
// dst. Object keys come out sorted (ast objects iterate sorted), numbers
// exactly as the input held them; a member or element noted in raws is
// its JSON compacted.
func appendJSON(dst []byte, v ast.Value, raws rawTerms) ([]byte, error) {
	switch x := v.(type) {
	case ast.Null:
		return append(dst, "null"...), nil
	case ast.Boolean:
		return strconv.AppendBool(dst, bool(x)), nil
	case ast.Number:
		return append(dst, x...), nil
	case ast.String:
		return appendJSONString(dst, string(x)), nil
	case *ast.Array:
		dst = append(dst, '[')
		var err error
		for i := 0; i < x.Len() && err == nil; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, err = raws.appendTerm(dst, x.Elem(i))
		}
		return append(dst, ']'), err
	case ast.Object:
		dst = append(dst, '{')
		first := true
		err := x.Iter(func(k, val *ast.Term) error {
			key, ok := k.Value.(ast.String)
			if !ok {
				return fmt.Errorf("object key %v is not a string", k)
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, string(key))
			dst = append(dst, ':')
			var err error
			dst, err = raws.appendTerm(dst, val)
			return err
		})
		return append(dst, '}'), err
	}
	return dst, fmt.Errorf("value of type %s is not JSON", ast.ValueName(v))
}

// rawTerms notes the terms of an input document parsed from JSON the
// gateway holds (the model's tool input, the tool's schema, earlier calls'
// inputs, a tool's output) with those bytes. Only objects and arrays are
// noted: scalars render as cheaply, and may be interned terms that appear
// elsewhere in the document.
type rawTerms []rawTerm

type rawTerm struct {
	t   *ast.Term
	raw json.RawMessage
}

// json is jsonTerm, noting the term it parsed from raw.
func (r *rawTerms) json(raw json.RawMessage, empty *ast.Term) (*ast.Term, error) {
	t, err := jsonTerm(raw, empty)
	if err == nil && t != empty {
		r.note(t, raw)
	}
	return t, err
}

// note records that t was parsed from the valid JSON raw.
func (r *rawTerms) note(t *ast.Term, raw json.RawMessage) {
	if r == nil || len(raw) == 0 {
		return
	}
	switch t.Value.(type) {
	case ast.Object, *ast.Array:
		*r = append(*r, rawTerm{t, raw})
	}
}

// appendTerm appends t's JSON: its noted bytes compacted, else rendered.
func (r rawTerms) appendTerm(dst []byte, t *ast.Term) ([]byte, error) {
	for _, rt := range r {
		if rt.t == t {
			buf := bytes.NewBuffer(dst)
			if err := json.Compact(buf, rt.raw); err != nil {
				return dst, err
			}
			return buf.Bytes(), nil
		}
	}
	return appendJSON(dst, t.Value, r)
}

// appendJSONString appends s as a JSON string escaped as encoding/json
// escapes it (invalid UTF-8 as U+FFFD), except that <, > and & stay as
// they are.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // as encoding/json: JavaScript line terminators
			dst = append(dst, `\u202`...)
			dst = append(dst, hex[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// maxRecordedMessages bounds messagesCount in a recorded input: the
// context rebuilt from it holds that many (empty) messages.
const maxRecordedMessages = 1 << 20

// recordedIdentity is the identity part of both input documents.
type recordedIdentity struct {
	Agent         string           `json:"agent"`
	SessionID     string           `json:"sessionId"`
	RequestID     string           `json:"requestId"`
	EntryPath     string           `json:"entryPath"`
	Depth         int              `json:"depth"`
	Deadline      string           `json:"deadline"`
	Aborted       bool             `json:"aborted"`
	Principal     engine.Principal `json:"principal"`
	Tool          recordedTool     `json:"tool"`
	ToolCallID    string           `json:"toolCallId"`
	StepNumber    int              `json:"stepNumber"`
	MessagesCount int              `json:"messagesCount"`
	// State is absent when the rules read no declared state.
	State map[string]any `json:"state"`
}

type recordedTool struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Server      string          `json:"server"`
	Description string          `json:"description"`
	Dynamic     bool            `json:"dynamic"`
	Input       json.RawMessage `json:"input"`
	Schema      json.RawMessage `json:"schema"`
}

// DecodeToolCallInput turns an input document of data.turngate.tool_call
// (what ToolCallInput returns, a decision record's input) back into the
// tool call that builds it: ToolCallInput of the result is the document
// again. The document's messages appear only as messagesCount, so the
// call holds that many empty messages. Unknown fields are errors.
func DecodeToolCallInput(data []byte) (*engine.ToolCallContext, error) {
	var doc struct {
		recordedIdentity
		Body          map[string]any `json:"body"`
		PreviousCalls []struct {
			ToolName   string          `json:"toolName"`
			ToolCallID string          `json:"toolCallId"`
			Input      json.RawMessage `json:"input"`
			Decision   string          `json:"decision"`
			Success    bool            `json:"success"`
			StepNumber int             `json:"stepNumber"`
		} `json:"previousCalls"`
		// Attachments are absent from records made before files existed.
		Attachments []engine.Attachment `json:"attachments"`
	}
	if err := decodeStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding tool_call input: %w", err)
	}
	id, msgs, err := doc.context()
	if err != nil {
		return nil, fmt.Errorf("decoding tool_call input: %w", err)
	}
	tc := &engine.ToolCallContext{Identity: id, Type: "tool-call", ToolCallID: doc.ToolCallID,
		ToolName: doc.Tool.Name, Input: doc.Tool.Input, Dynamic: doc.Tool.Dynamic, Tool: doc.Tool.info(),
		StepNumber: doc.StepNumber, Messages: msgs, Body: doc.Body, Attachments: doc.Attachments, State: doc.State,
		PreviousCalls: make([]engine.ToolCallRecord, len(doc.PreviousCalls))}
	for i, pc := range doc.PreviousCalls {
		tc.PreviousCalls[i] = engine.ToolCallRecord{ToolCallID: pc.ToolCallID, ToolName: pc.ToolName,
			Input: pc.Input, Decision: pc.Decision, Success: pc.Success, StepNumber: pc.StepNumber}
	}
	return tc, nil
}

// DecodeToolResultInput turns an input document of
// data.turngate.tool_result back into the result context that builds it,
// as DecodeToolCallInput does for tool calls.
func DecodeToolResultInput(data []byte) (*engine.ToolCallResultContext, error) {
	var doc struct {
		recordedIdentity
		Output         json.RawMessage `json:"output"`
		EffectiveInput json.RawMessage `json:"effectiveInput"`
		Success        bool            `json:"success"`
		Error          string          `json:"error"`
		Decision       string          `json:"decision"`
		Executed       bool            `json:"executed"`
		DurationMs     float64         `json:"durationMs"`
	}
	if err := decodeStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding tool_result input: %w", err)
	}
	id, msgs, err := doc.context()
	if err != nil {
		return nil, fmt.Errorf("decoding tool_result input: %w", err)
	}
	return &engine.ToolCallResultContext{Identity: id, Type: "tool-call", ToolCallID: doc.ToolCallID,
		ToolName: doc.Tool.Name, Input: doc.Tool.Input, EffectiveInput: nullIsEmpty(doc.EffectiveInput),
		Dynamic: doc.Tool.Dynamic, Tool: doc.Tool.info(), StepNumber: doc.StepNumber, Messages: msgs,
		DurationMs: doc.DurationMs, Success: doc.Success, Output: nullIsEmpty(doc.Output), Error: doc.Error,
		Decision: doc.Decision, Executed: doc.Executed, State: doc.State}, nil
}

// context returns the identity and the placeholder messages of a
// recorded input.
func (d *recordedIdentity) context() (engine.Identity, []engine.ModelMessage, error) {
	if d.MessagesCount < 0 || d.MessagesCount > maxRecordedMessages {
		return engine.Identity{}, nil, fmt.Errorf("messagesCount %d is out of range [0, %d]", d.MessagesCount, maxRecordedMessages)
	}
	var deadline time.Time
	if d.Deadline != "" {
		var err error
		if deadline, err = time.Parse(time.RFC3339Nano, d.Deadline); err != nil {
			return engine.Identity{}, nil, fmt.Errorf("deadline %q is not an RFC 3339 time", d.Deadline)
		}
	}
	return engine.Identity{RequestID: d.RequestID, SessionID: d.SessionID, Agent: d.Agent, Principal: d.Principal,
		EntryPath: d.EntryPath, Depth: d.Depth, Deadline: deadline, Aborted: d.Aborted}, make([]engine.ModelMessage, d.MessagesCount), nil
}

func (t *recordedTool) info() engine.ToolInfo {
	return engine.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: nullIsEmpty(t.Schema),
		Kind: t.Kind, Server: t.Server}
}

// nullIsEmpty maps a JSON null to no value, as the input builders render
// no value as null.
func nullIsEmpty(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// decodeStrict decodes one JSON document into v, rejecting unknown fields
// and trailing data, keeping numbers exact.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one document")
	}
	return nil
}
