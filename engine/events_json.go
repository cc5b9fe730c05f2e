package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// MarshalJSON writes exactly the fields the AI SDK's UI message chunk schema
// expects for e.Type, in the order the ai server writes them
// (protocols.md A.5, A.6): text-delta always has "delta", tool-output-available
// always has "output" (null when empty), finish always has "finishReason".
// Unknown types are written with every set field. Strings are escaped as
// JavaScript's JSON.stringify does; call MarshalJSON directly for those exact
// bytes (json.Marshal re-escapes <, >, & and U+2028/U+2029, which is
// equivalent JSON).
func (e Event) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(64 + len(e.Delta) + len(e.Input) + len(e.Output))
	b.WriteString(`{"type":`)
	writeString(&b, e.Type)
	var err error
	switch e.Type {
	case EventStart:
		if e.MessageID != "" {
			field(&b, "messageId", e.MessageID)
		}
		err = rawField(&b, "messageMetadata", e.MessageMetadata, false)
	case EventStartStep, EventFinishStep:
	case EventTextStart, EventTextEnd, EventReasoningStart, EventReasoningEnd:
		field(&b, "id", e.ID)
	case EventTextDelta, EventReasoningDelta:
		field(&b, "id", e.ID)
		field(&b, "delta", e.Delta)
	case EventToolInputStart:
		field(&b, "toolCallId", e.ToolCallID)
		field(&b, "toolName", e.ToolName)
		providerExecuted(&b, e.ProviderExecuted)
		boolField(&b, "dynamic", e.Dynamic)
	case EventToolInputDelta:
		field(&b, "toolCallId", e.ToolCallID)
		field(&b, "inputTextDelta", e.InputTextDelta)
	case EventToolInputAvailable, EventToolInputError:
		field(&b, "toolCallId", e.ToolCallID)
		field(&b, "toolName", e.ToolName)
		err = rawField(&b, "input", e.Input, true)
		if e.Type == EventToolInputError {
			field(&b, "errorText", e.ErrorText)
		}
		providerExecuted(&b, e.ProviderExecuted)
		if e.Dynamic {
			boolField(&b, "dynamic", true)
		}
	case EventToolOutputAvailable:
		field(&b, "toolCallId", e.ToolCallID)
		err = rawField(&b, "output", e.Output, true)
		providerExecuted(&b, e.ProviderExecuted)
		boolField(&b, "dynamic", e.Dynamic)
	case EventToolOutputError:
		field(&b, "toolCallId", e.ToolCallID)
		field(&b, "errorText", e.ErrorText)
		providerExecuted(&b, e.ProviderExecuted)
		boolField(&b, "dynamic", e.Dynamic)
	case EventToolApprovalRequest:
		field(&b, "approvalId", e.ApprovalID)
		field(&b, "toolCallId", e.ToolCallID)
		if e.Reason != "" {
			field(&b, "reason", e.Reason)
		}
		err = rawField(&b, "approvalDescriptor", e.ApprovalDescriptor, false)
	case EventToolOutputDenied:
		field(&b, "toolCallId", e.ToolCallID)
	case EventFinish:
		field(&b, "finishReason", e.FinishReason)
		err = rawField(&b, "messageMetadata", e.MessageMetadata, false)
	case EventError:
		field(&b, "errorText", e.ErrorText)
	case EventAbort:
	case EventMessageMetadata:
		err = rawField(&b, "messageMetadata", e.MessageMetadata, true)
	default:
		return marshalGeneric(e)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s event: %w", e.Type, err)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalGeneric writes an event of an unknown type with the struct tags.
func marshalGeneric(e Event) ([]byte, error) {
	type plain Event
	return json.Marshal(plain(e))
}

func field(b *bytes.Buffer, name, value string) {
	b.WriteString(`,"`)
	b.WriteString(name)
	b.WriteString(`":`)
	writeString(b, value)
}

func boolField(b *bytes.Buffer, name string, v bool) {
	b.WriteString(`,"`)
	b.WriteString(name)
	if v {
		b.WriteString(`":true`)
	} else {
		b.WriteString(`":false`)
	}
}

func providerExecuted(b *bytes.Buffer, v bool) {
	if v {
		boolField(b, "providerExecuted", true)
	}
}

// rawField writes a JSON value compacted onto one line (an SSE data line
// must not contain newlines). An empty value is written as null when
// required and skipped otherwise.
func rawField(b *bytes.Buffer, name string, v json.RawMessage, required bool) error {
	if len(v) == 0 && !required {
		return nil
	}
	b.WriteString(`,"`)
	b.WriteString(name)
	b.WriteString(`":`)
	if len(v) == 0 {
		b.WriteString("null")
		return nil
	}
	if err := json.Compact(b, v); err != nil {
		return fmt.Errorf("field %s: %w", name, err)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// writeString writes s as a JSON string the way JavaScript's JSON.stringify
// does (no HTML escaping), replacing invalid UTF-8 with U+FFFD.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(s[start:i])
			b.WriteString(`\ufffd`)
			i++
			start = i
			continue
		}
		i += size
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// MarshalJSON writes "auto", "none" and "required" as strings and a specific
// tool as {"type":"tool","toolName":…}, as the AI SDK does.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
		return []byte(`"` + c.Type + `"`), nil
	case ToolChoiceTool:
		if c.ToolName == "" {
			return nil, errors.New(`tool choice "tool" needs a toolName`)
		}
		var b bytes.Buffer
		b.WriteString(`{"type":"tool","toolName":`)
		writeString(&b, c.ToolName)
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("tool choice %q is not one of auto, none, required, tool", c.Type)
}

// UnmarshalJSON accepts "auto", "none", "required" or
// {"type":"tool","toolName":"<name>"} and rejects anything else.
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return errors.New(`tool choice must be a string or {"type":"tool","toolName":…}, got null`)
	}
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		switch s {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			*c = ToolChoice{Type: s}
			return nil
		}
		return fmt.Errorf("tool choice %q is not one of auto, none, required or {\"type\":\"tool\",\"toolName\":…}", s)
	}
	var obj struct {
		Type     string `json:"type"`
		ToolName string `json:"toolName"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("tool choice must be a string or {\"type\":\"tool\",\"toolName\":…}: %w", err)
	}
	if obj.Type != ToolChoiceTool {
		return fmt.Errorf("tool choice object must have type \"tool\", got %q", obj.Type)
	}
	if obj.ToolName == "" {
		return errors.New(`tool choice {"type":"tool"} needs a non-empty toolName`)
	}
	*c = ToolChoice{Type: ToolChoiceTool, ToolName: obj.ToolName}
	return nil
}
