package opa

import (
	"encoding/json"
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

// The recorded JSON is the input document, byte for byte what
// encoding/json makes of ToolCallInput, and decoding it rebuilds a context
// whose document is the same again: what eval and replay rely on.
func TestRecordedInputRoundTrip(t *testing.T) {
	tc := fullCall()
	tc.Body["odd"] = "tab\there \x7f \xff bad utf-8 <&>"
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
			// encoding/json escapes <, > and & for HTML; both are JSON, as
			// are U+FFFD and its escape.
			if norm(string(got)) != norm(string(want)) {
				t.Errorf("recorded JSON differs from the input document:\n got %s\nwant %s", got, want)
			}
			again, err := c.decode(got)
			if err != nil {
				t.Fatal(err)
			}
			if norm(string(again)) != norm(string(got)) {
				t.Errorf("decoded and rendered again:\n got %s\nwant %s", again, got)
			}
		})
	}
}

func norm(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\ufffd`, "\ufffd").Replace(s)
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
