package engine_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
)

func TestConvertToModelMessages(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	in := []engine.UIMessage{
		{ID: "s", Role: engine.RoleSystem, Parts: []engine.UIPart{{Type: "text", Text: "sys "}, {Type: "text", Text: "prompt"}}},
		{ID: "u", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: "text", Text: "weather?"}, {Type: "data-ui", Data: raw(`{}`)},
			{Type: "file", MediaType: "image/png", URL: "data:image/png;base64,AAAA", Filename: "a.png"}, {Type: "file", MediaType: "image/png"}}},
		{ID: "a", Role: engine.RoleAssistant, Parts: []engine.UIPart{
			{Type: "step-start"},
			{Type: "reasoning", Text: "hmm", State: "done"},
			{Type: "text", Text: "Let me check.", State: "done"},
			{Type: "tool-getWeather", ToolCallID: "c1", State: "output-available", Input: raw(`{"city":"Paris"}`), Output: raw(`{"t":20}`)},
			{Type: "dynamic-tool", ToolName: "mcp_x", ToolCallID: "c2", State: "output-error", Input: raw(`{}`), ErrorText: "down"},
			{Type: "tool-pending", ToolCallID: "c3", State: "input-available", Input: raw(`{}`)},
			{Type: "step-start"},
			{Type: "text", Text: "20 degrees.", State: "done"},
			{Type: "data-card", Data: raw(`{}`)},
		}},
		{ID: "empty", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: "data-x"}}},
	}
	want := []engine.ModelMessage{
		{Role: "system", Content: []engine.ContentPart{{Type: "text", Text: "sys prompt"}}},
		{Role: "user", Content: []engine.ContentPart{{Type: "text", Text: "weather?"},
			{Type: "file", MediaType: "image/png", URL: "data:image/png;base64,AAAA", Filename: "a.png"}}},
		{Role: "assistant", Content: []engine.ContentPart{
			{Type: "reasoning", Text: "hmm"},
			{Type: "text", Text: "Let me check."},
			{Type: "tool-call", ToolCallID: "c1", ToolName: "getWeather", Input: raw(`{"city":"Paris"}`)},
			{Type: "tool-call", ToolCallID: "c2", ToolName: "mcp_x", Input: raw(`{}`)},
		}},
		{Role: "tool", Content: []engine.ContentPart{
			{Type: "tool-result", ToolCallID: "c1", ToolName: "getWeather", Output: raw(`{"t":20}`)},
			{Type: "tool-result", ToolCallID: "c2", ToolName: "mcp_x", Output: raw(`"down"`), IsError: true},
		}},
		{Role: "assistant", Content: []engine.ContentPart{{Type: "text", Text: "20 degrees."}}},
	}
	got := engine.ConvertToModelMessages(in)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}
