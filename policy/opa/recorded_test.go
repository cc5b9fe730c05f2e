package opa

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

func fullResult() *engine.ToolCallResultContext {
	tc := fullCall()
	return &engine.ToolCallResultContext{
		Identity: tc.Identity, Type: "tool-call", ToolCallID: tc.ToolCallID, ToolName: tc.ToolName,
		Input: tc.Input, EffectiveInput: json.RawMessage(`{"query":"turngate","limit":50}`),
		Tool: tc.Tool, StepNumber: tc.StepNumber, Messages: tc.Messages, DurationMs: 12.5,
		Success: true, Output: json.RawMessage(`{"hits":[{"title":"x\u0001\"\\ é \u2028"}]}`), Decision: engine.DecisionRewrite, Executed: true,
	}
}

// The recorded JSON is the input document (what encoding/json makes of
// ToolCallInput, the JSON the gateway holds, such as the model's tool
// input, copied with its keys in the order they came in), and decoding it
// rebuilds a context whose recorded JSON is the same bytes again: what
// eval and replay rely on.
func TestRecordedInputRoundTrip(t *testing.T) {
	tc := fullCall()
	tc.Body["odd"] = "tab\there \x7f \xff bad utf-8 <&>"
	tc.Input = json.RawMessage("{\"query\": \"turngate\",\n \"limit\": 12345678901234567890}")
	rc := fullResult()
	for _, c := range []struct {
		name   string
		render func() (json.RawMessage, error)
		doc    func() any
		decode func([]byte) (json.RawMessage, error)
	}{
		{"tool_call", func() (json.RawMessage, error) { return ToolCallInputJSON(tc) },
			func() any { return ToolCallInput(tc) },
			func(b []byte) (json.RawMessage, error) {
				back, err := DecodeToolCallInput(b)
				if err != nil {
					return nil, err
				}
				return ToolCallInputJSON(back)
			}},
		{"tool_result", func() (json.RawMessage, error) { return ToolResultInputJSON(rc) },
			func() any { return ToolResultInput(rc) },
			func(b []byte) (json.RawMessage, error) {
				back, err := DecodeToolResultInput(b)
				if err != nil {
					return nil, err
				}
				return ToolResultInputJSON(back)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(c.doc())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decodeExact(t, got), decodeExact(t, want)) {
				t.Errorf("recorded JSON differs from the input document:\n got %s\nwant %s", got, want)
			}
			if !strings.Contains(string(got), `"input":{"query":"turngate","limit":12345678901234567890}`) {
				t.Errorf("the model's input is not copied compacted, in its order: %s", got)
			}
			again, err := c.decode(got)
			if err != nil {
				t.Fatal(err)
			}
			// Invalid UTF-8 is recorded as the escape \ufffd, which
			// decodes to U+FFFD, written as it is.
			if norm(string(again)) != norm(string(got)) {
				t.Errorf("decoded and rendered again:\n got %s\nwant %s", again, got)
			}
		})
	}
}

func norm(s string) string { return strings.ReplaceAll(s, `\ufffd`, "\ufffd") }

// decodeExact decodes the JSON document b keeping numbers as written.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDecodeRecordedInputErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"misspelt field", `{"tool": {"nmae": "x"}}`, `unknown field "nmae"`},
		{"wrong type", `{"stepNumber": "2"}`, "cannot unmarshal string"},
		{"huge messagesCount", `{"messagesCount": 1e12}`, "cannot unmarshal number"},
		{"negative messagesCount", `{"messagesCount": -1}`, "messagesCount -1 is out of range"},
		{"two documents", `{} {}`, "more than one document"},
		{"not JSON", `tool: x`, "invalid character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeToolCallInput([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}
