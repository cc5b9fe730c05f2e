package uistream

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/jsonstr"
)

// frameScratch is the stack space EventFrame encodes an event into before
// copying it out at its exact size: it holds every chunk but tool inputs
// and outputs of more than a few hundred bytes, which are encoded straight
// into a slice sized for them.
const frameScratch = 512

// frameOverhead bounds what a frame adds to its event's string and raw
// fields: "data: ", keys, quotes, booleans, null and "\n\n" come to at
// most 116 bytes (tool-input-error). Escapes can make a frame longer;
// append then grows it.
const frameOverhead = 128

// Frame encodes v as one SSE data event: an engine.Event as EventFrame
// does, any other value by json.Marshal.
func Frame(v any) ([]byte, error) {
	if ev, ok := v.(engine.Event); ok {
		return EventFrame(ev)
	}
	return appendMarshalled(nil, v)
}

// EventFrame encodes ev as one SSE data event, in a slice of its own that
// fits it. Unlike Frame(ev) it takes ev without boxing it in an interface,
// which costs the caller an allocation of the whole Event.
func EventFrame(ev engine.Event) ([]byte, error) {
	n := frameOverhead + len(ev.Type) + len(ev.MessageID) + len(ev.ID) + len(ev.Delta) +
		len(ev.ToolCallID) + len(ev.ToolName) + len(ev.InputTextDelta) + len(ev.Input) +
		len(ev.Output) + len(ev.ErrorText) + len(ev.ApprovalID) + len(ev.Reason) + len(ev.ApprovalDescriptor) + len(ev.FinishReason) + len(ev.MessageMetadata)
	if n > frameScratch {
		f, err := AppendFrame(make([]byte, 0, n), ev)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	var scratch [frameScratch]byte
	f, err := AppendFrame(scratch[:0], ev)
	if err != nil {
		return nil, err
	}
	return append(make([]byte, 0, len(f)), f...), nil
}

// AppendFrame appends ev to dst as one SSE data event, the bytes
// json.Marshal(ev) would give between "data: " and "\n\n": ev's fields as
// engine.Event.MarshalJSON chooses them per type, with json.Marshal's
// escaping of <, >, &, U+2028 and U+2029 on top. It writes the known event
// types itself; an unknown type, and an input, output or metadata that is
// not valid JSON, go through json.Marshal, which writes the first and
// reports the second. On error dst is returned unchanged.
func AppendFrame(dst []byte, ev engine.Event) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `data: {"type":`...)
	dst = jsonstr.AppendHTMLEscaped(dst, ev.Type)
	ok := true
	switch ev.Type {
	case engine.EventStart:
		if ev.MessageID != "" {
			dst = appendField(dst, `,"messageId":`, ev.MessageID)
		}
		dst, ok = appendRaw(dst, `,"messageMetadata":`, ev.MessageMetadata, false)
	case engine.EventStartStep, engine.EventFinishStep, engine.EventAbort:
	case engine.EventMessageMetadata:
		dst, ok = appendRaw(dst, `,"messageMetadata":`, ev.MessageMetadata, true)
	case engine.EventTextStart, engine.EventTextEnd, engine.EventReasoningStart, engine.EventReasoningEnd:
		dst = appendField(dst, `,"id":`, ev.ID)
	case engine.EventTextDelta, engine.EventReasoningDelta:
		dst = appendField(dst, `,"id":`, ev.ID)
		dst = appendField(dst, `,"delta":`, ev.Delta)
	case engine.EventToolInputStart:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		dst = appendField(dst, `,"toolName":`, ev.ToolName)
		dst = appendProviderExecuted(dst, ev.ProviderExecuted)
		dst = appendBool(dst, `,"dynamic":`, ev.Dynamic)
	case engine.EventToolInputDelta:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		dst = appendField(dst, `,"inputTextDelta":`, ev.InputTextDelta)
	case engine.EventToolInputAvailable, engine.EventToolInputError:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		dst = appendField(dst, `,"toolName":`, ev.ToolName)
		dst, ok = appendRaw(dst, `,"input":`, ev.Input, true)
		if ev.Type == engine.EventToolInputError {
			dst = appendField(dst, `,"errorText":`, ev.ErrorText)
		}
		dst = appendProviderExecuted(dst, ev.ProviderExecuted)
		if ev.Dynamic {
			dst = appendBool(dst, `,"dynamic":`, true)
		}
	case engine.EventToolOutputAvailable:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		dst, ok = appendRaw(dst, `,"output":`, ev.Output, true)
		dst = appendProviderExecuted(dst, ev.ProviderExecuted)
		dst = appendBool(dst, `,"dynamic":`, ev.Dynamic)
	case engine.EventToolOutputError:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		dst = appendField(dst, `,"errorText":`, ev.ErrorText)
		dst = appendProviderExecuted(dst, ev.ProviderExecuted)
		dst = appendBool(dst, `,"dynamic":`, ev.Dynamic)
	case engine.EventToolApprovalRequest:
		dst = appendField(dst, `,"approvalId":`, ev.ApprovalID)
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
		if ev.Reason != "" {
			dst = appendField(dst, `,"reason":`, ev.Reason)
		}
		dst, ok = appendRaw(dst, `,"approvalDescriptor":`, ev.ApprovalDescriptor, false)
	case engine.EventToolOutputDenied:
		dst = appendField(dst, `,"toolCallId":`, ev.ToolCallID)
	case engine.EventFinish:
		dst = appendField(dst, `,"finishReason":`, ev.FinishReason)
		dst, ok = appendRaw(dst, `,"messageMetadata":`, ev.MessageMetadata, false)
	case engine.EventError:
		dst = appendField(dst, `,"errorText":`, ev.ErrorText)
	default:
		ok = false
	}
	if !ok {
		return appendMarshalled(dst[:start], ev)
	}
	return append(dst, "}\n\n"...), nil
}

// appendMarshalled appends v encoded by json.Marshal as one SSE data event.
func appendMarshalled(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("encoding stream chunk: %w", err)
	}
	dst = slices.Grow(dst, len(b)+8)
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n'), nil
}

// appendField appends key (`,"name":`) and the string value.
func appendField(dst []byte, key, value string) []byte {
	return jsonstr.AppendHTMLEscaped(append(dst, key...), value)
}

func appendBool(dst []byte, key string, v bool) []byte {
	dst = append(dst, key...)
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func appendProviderExecuted(dst []byte, v bool) []byte {
	if v {
		dst = appendBool(dst, `,"providerExecuted":`, true)
	}
	return dst
}

// appendRaw appends key and the JSON value v compacted and HTML-escaped,
// as engine.Event.MarshalJSON's json.Compact and json.Marshal's escaping
// together write it. An empty v is written as null when required and
// skipped otherwise. It reports false, having appended nothing, if v is
// not valid JSON.
func appendRaw(dst []byte, key string, v json.RawMessage, required bool) ([]byte, bool) {
	if len(v) == 0 {
		if required {
			dst = append(dst, key...)
			dst = append(dst, "null"...)
		}
		return dst, true
	}
	if !json.Valid(v) {
		return dst, false
	}
	return appendCompact(append(dst, key...), v), true
}

// appendCompact appends the valid JSON value v without the spaces between
// its tokens and with <, >, &, U+2028 and U+2029 escaped, which can only
// occur inside its strings. Like json.Marshal it passes other bytes of
// strings through, invalid UTF-8 included.
func appendCompact(dst, v []byte) []byte {
	start, inString := 0, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case ' ', '\t', '\n', '\r':
				dst = append(dst, v[start:i]...)
				start = i + 1
			}
			continue
		}
		switch {
		case c == '\\':
			i++ // the escaped byte cannot end the string
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			start = i + 1
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xf])
			i += 2
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

const hexDigits = "0123456789abcdef"
