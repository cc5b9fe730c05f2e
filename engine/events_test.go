package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
)

// weatherStep is the first step of protocols.md A.6's server-tool and
// client-tool transcripts.
func weatherStep() script {
	return step(
		[]engine.StreamPart{
			{Type: engine.StreamReasoningStart, ID: "r1"},
			{Type: engine.StreamReasoningDelta, ID: "r1", Text: "thinking"},
			{Type: engine.StreamReasoningEnd, ID: "r1"},
		},
		textParts("t1", "Let me check."),
		[]engine.StreamPart{
			{Type: engine.StreamToolInputStart, ToolCallID: "call_1", ToolName: "getWeather"},
			{Type: engine.StreamToolInputDelta, ToolCallID: "call_1", Text: `{"city":`},
			{Type: engine.StreamToolInputDelta, ToolCallID: "call_1", Text: `"Paris"}`},
			{Type: engine.StreamToolCall, ToolCallID: "call_1", ToolName: "getWeather", Input: json.RawMessage(`{"city":"Paris"}`)},
			finish(engine.FinishToolCalls, 5, 5),
		},
	)
}

// TestStreamMatchesAISDKGolden compares the whole emitted UI stream with the
// ai server's reference bytes (protocols.md A.6, without the [DONE] line the
// SSE encoder adds).
func TestStreamMatchesAISDKGolden(t *testing.T) {
	weather := engine.Tool{ToolInfo: engine.ToolInfo{Name: "getWeather", Kind: engine.ToolKindHTTP,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
	server := weather
	server.Executor = engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
		return json.RawMessage(`{"city": "Paris", "weather": "sunny"}`), nil
	})
	tests := []struct {
		golden  string
		tool    engine.Tool
		scripts []script
	}{
		{golden: "server-tool.golden", tool: server, scripts: []script{weatherStep(), step(textParts("t2", "Sunny in Paris."), one(finish(engine.FinishStop, 1, 1)))}},
		{golden: "client-tool.golden", tool: weather, scripts: []script{weatherStep()}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			h := newHarness(t, newFake(tt.scripts...), tt.tool)
			res := h.run(context.Background())
			// The message to persist, as the AI SDK client would hold it
			// after this stream (protocols.md A.4).
			msg, err := json.Marshal(res.Message)
			if err != nil {
				t.Fatal(err)
			}
			golden.CheckJSON(t, filepath.Join("testdata", strings.TrimSuffix(tt.golden, ".golden")+".message.json"), msg)
			got := h.ev.text() + "\n"
			golden.Check(t, filepath.Join("testdata", tt.golden), got)
		})
	}
}

func TestEventMarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   engine.Event
		want string
	}{
		{"start", engine.Event{Type: "start", MessageID: "msg_assistant_1"}, `{"type":"start","messageId":"msg_assistant_1"}`},
		{"start without id", engine.Event{Type: "start"}, `{"type":"start"}`},
		{"start-step", engine.Event{Type: "start-step", ID: "ignored"}, `{"type":"start-step"}`},
		{"text-delta", engine.Event{Type: "text-delta", ID: "t1", Delta: "Let me check."}, `{"type":"text-delta","id":"t1","delta":"Let me check."}`},
		{"empty text-delta", engine.Event{Type: "text-delta", ID: "t1"}, `{"type":"text-delta","id":"t1","delta":""}`},
		{"escapes like JSON.stringify", engine.Event{Type: "text-delta", ID: "t", Delta: "a\"b\\c\n<&>\x01\u2028"}, `{"type":"text-delta","id":"t","delta":"a\"b\\c\n<&>\u0001` + "\u2028" + `"}`},
		{"invalid UTF-8", engine.Event{Type: "text-delta", ID: "t", Delta: "a\xffb"}, `{"type":"text-delta","id":"t","delta":"a\ufffdb"}`},
		{"reasoning-end", engine.Event{Type: "reasoning-end", ID: "r1"}, `{"type":"reasoning-end","id":"r1"}`},
		{"tool-input-start", engine.Event{Type: "tool-input-start", ToolCallID: "call_1", ToolName: "getWeather"}, `{"type":"tool-input-start","toolCallId":"call_1","toolName":"getWeather","dynamic":false}`},
		{"tool-input-delta", engine.Event{Type: "tool-input-delta", ToolCallID: "call_1", InputTextDelta: `{"city":`}, `{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"{\"city\":"}`},
		{"tool-input-available compacts input", engine.Event{Type: "tool-input-available", ToolCallID: "call_1", ToolName: "getWeather", Input: json.RawMessage("{\n \"city\": \"Paris\"\n}")},
			`{"type":"tool-input-available","toolCallId":"call_1","toolName":"getWeather","input":{"city":"Paris"}}`},
		{"tool-input-available dynamic", engine.Event{Type: "tool-input-available", ToolCallID: "c", ToolName: "x", Input: json.RawMessage(`{}`), Dynamic: true, ProviderExecuted: true},
			`{"type":"tool-input-available","toolCallId":"c","toolName":"x","input":{},"providerExecuted":true,"dynamic":true}`},
		{"tool-input-error", engine.Event{Type: "tool-input-error", ToolCallID: "c", ToolName: "x", ErrorText: "bad"}, `{"type":"tool-input-error","toolCallId":"c","toolName":"x","input":null,"errorText":"bad"}`},
		{"tool-output-available", engine.Event{Type: "tool-output-available", ToolCallID: "call_1", Output: json.RawMessage(`{"city":"Paris","weather":"sunny"}`)},
			`{"type":"tool-output-available","toolCallId":"call_1","output":{"city":"Paris","weather":"sunny"},"dynamic":false}`},
		{"tool-output-available empty", engine.Event{Type: "tool-output-available", ToolCallID: "c"}, `{"type":"tool-output-available","toolCallId":"c","output":null,"dynamic":false}`},
		{"tool-output-error", engine.Event{Type: "tool-output-error", ToolCallID: "c", ErrorText: "boom"}, `{"type":"tool-output-error","toolCallId":"c","errorText":"boom","dynamic":false}`},
		{"error", engine.Event{Type: "error", ErrorText: "An error occurred."}, `{"type":"error","errorText":"An error occurred."}`},
		{"finish", engine.Event{Type: "finish", FinishReason: "stop"}, `{"type":"finish","finishReason":"stop"}`},
		{"finish with metadata", engine.Event{Type: "finish", FinishReason: "error", MessageMetadata: json.RawMessage(`{"a": 1}`)}, `{"type":"finish","finishReason":"error","messageMetadata":{"a":1}}`},
		{"abort", engine.Event{Type: "abort"}, `{"type":"abort"}`},
		{"message-metadata", engine.Event{Type: "message-metadata", MessageMetadata: json.RawMessage(`{"interrupted": "aborted"}`)}, `{"type":"message-metadata","messageMetadata":{"interrupted":"aborted"}}`},
		{"unknown type", engine.Event{Type: "data-x", ID: "1"}, `{"type":"data-x","id":"1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.ev.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
	if _, err := json.Marshal(engine.Event{Type: "tool-output-available", Output: json.RawMessage(`{bad`)}); err == nil {
		t.Error("invalid output marshalled")
	}
}

func FuzzEventMarshalJSON(f *testing.F) {
	f.Add("text-delta", "hello\n\"x\"", `{"a":1}`)
	f.Add("tool-output-available", "\xff\u2028", `[1, 2]`)
	f.Add("tool-input-available", "", ``)
	f.Fuzz(func(t *testing.T, typ, text, raw string) {
		ev := engine.Event{Type: typ, ID: text, Delta: text, ErrorText: text, ToolName: text, Output: json.RawMessage(raw), Input: json.RawMessage(raw)}
		b, err := ev.MarshalJSON()
		if err != nil {
			if json.Valid([]byte(raw)) {
				t.Fatalf("valid raw %q rejected: %v", raw, err)
			}
			return
		}
		if !json.Valid(b) || strings.ContainsAny(string(b), "\n\r") {
			t.Fatalf("bad chunk line %q", b)
		}
	})
}

func TestToolChoiceJSON(t *testing.T) {
	tests := []struct {
		in   string
		want engine.ToolChoice
		err  string
	}{
		{in: `"auto"`, want: engine.ToolChoice{Type: "auto"}},
		{in: `"none"`, want: engine.ToolChoice{Type: "none"}},
		{in: `"required"`, want: engine.ToolChoice{Type: "required"}},
		{in: `{"type":"tool","toolName":"search"}`, want: engine.ToolChoice{Type: "tool", ToolName: "search"}},
		{in: `"tool"`, err: `tool choice "tool" is not one of`},
		{in: `"sometimes"`, err: `tool choice "sometimes" is not one of`},
		{in: `{"type":"tool"}`, err: "needs a non-empty toolName"},
		{in: `{"type":"auto"}`, err: `must have type "tool"`},
		{in: `{"type":"tool","toolName":"x","extra":1}`, err: "unknown field"},
		{in: `42`, err: "must be a string or"},
		{in: `null`, err: "got null"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var c engine.ToolChoice
			err := json.Unmarshal([]byte(tt.in), &c)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || c != tt.want {
				t.Fatalf("got %+v, %v", c, err)
			}
			b, err := json.Marshal(c)
			if err != nil || strings.Join(strings.Fields(string(b)), "") != tt.in {
				t.Errorf("round trip %s, %v", b, err)
			}
		})
	}
	if _, err := json.Marshal(engine.ToolChoice{Type: "maybe"}); err == nil {
		t.Error("marshalled an invalid tool choice")
	}
}

func FuzzToolChoiceUnmarshal(f *testing.F) {
	for _, s := range []string{`"auto"`, `"required"`, `{"type":"tool","toolName":"search"}`, `{"type":1}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var c engine.ToolChoice
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted %q but cannot marshal %+v: %v", in, c, err)
		}
		var back engine.ToolChoice
		if err := json.Unmarshal(b, &back); err != nil || back != c {
			t.Fatalf("round trip of %q: %+v, %v", in, back, err)
		}
	})
}
