package celrules

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
)

func call(id, tool string) engine.ContentPart {
	return engine.ContentPart{Type: engine.ContentToolCall, ToolCallID: id, ToolName: tool, Input: json.RawMessage(`{}`)}
}

func result(id, tool string) engine.ContentPart {
	return engine.ContentPart{Type: engine.ContentToolResult, ToolCallID: id, ToolName: tool, Output: json.RawMessage(`"ok"`)}
}

func msg(role string, parts ...engine.ContentPart) engine.ModelMessage {
	return engine.ModelMessage{Role: role, Content: parts}
}

func textPart(s string) engine.ContentPart {
	return engine.ContentPart{Type: engine.ContentText, Text: s}
}

// conversation is the AI SDK's pruneMessages test shape: a user question,
// two tool calls answered in one tool message, a follow-up with a third
// call still open in the last messages.
var conversation = []engine.ModelMessage{
	msg("user", textPart("Weather in Tokyo and Busan?")),
	msg("assistant", engine.ContentPart{Type: engine.ContentReasoning, Text: "thinking"}, call("c1", "weather"), call("c2", "search")),
	msg("tool", result("c1", "weather"), result("c2", "search")),
	msg("assistant", textPart("Sunny in both.")),
	msg("user", textPart("And Seoul?")),
	msg("assistant", call("c3", "weather")),
	msg("tool", result("c3", "weather")),
}

func TestPruneMessages(t *testing.T) {
	tests := []struct {
		name  string
		mode  string
		tools []string
		want  []engine.ModelMessage
	}{
		{
			name: "all",
			mode: "all",
			want: []engine.ModelMessage{
				conversation[0],
				msg("assistant", engine.ContentPart{Type: engine.ContentReasoning, Text: "thinking"}),
				conversation[3], conversation[4],
			},
		},
		{
			name: "before-last-message keeps the call whose result is last",
			mode: "before-last-message",
			want: []engine.ModelMessage{
				conversation[0],
				msg("assistant", engine.ContentPart{Type: engine.ContentReasoning, Text: "thinking"}),
				conversation[3], conversation[4], conversation[5], conversation[6],
			},
		},
		{
			name: "before-last-2-messages",
			mode: "before-last-2-messages",
			want: []engine.ModelMessage{
				conversation[0],
				msg("assistant", engine.ContentPart{Type: engine.ContentReasoning, Text: "thinking"}),
				conversation[3], conversation[4], conversation[5], conversation[6],
			},
		},
		{
			name: "before-last-10-messages keeps everything",
			mode: "before-last-10-messages",
			want: conversation,
		},
		{
			name:  "per tool: only search is pruned",
			mode:  "before-last-2-messages",
			tools: []string{"search"},
			want: []engine.ModelMessage{
				conversation[0],
				msg("assistant", engine.ContentPart{Type: engine.ContentReasoning, Text: "thinking"}, call("c1", "weather")),
				msg("tool", result("c1", "weather")),
				conversation[3], conversation[4], conversation[5], conversation[6],
			},
		},
		{
			name:  "per tool: an empty list prunes nothing",
			mode:  "all",
			tools: []string{},
			want:  conversation,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep, err := parsePruneMode(tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(conversation)
			got := pruneMessages(conversation, keep, tt.tools)
			if !reflect.DeepEqual(got, tt.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				t.Errorf("got %s", g)
			}
			if after, _ := json.Marshal(conversation); string(after) != string(before) {
				t.Error("pruneMessages modified its input")
			}
		})
	}
}

func TestParsePruneModeErrors(t *testing.T) {
	for _, mode := range []string{"", "none-of-these", "before-last-x-messages", "before-last--1-messages", "before-last-2"} {
		if _, err := parsePruneMode(mode); err == nil {
			t.Errorf("parsePruneMode(%q) succeeded", mode)
		}
	}
}

func TestLastMessages(t *testing.T) {
	tests := []struct {
		n    int
		want int
	}{{0, 0}, {-1, 0}, {1, 1}, {3, 3}, {7, 7}, {100, 7}}
	for _, tt := range tests {
		if got := lastMessages(conversation, tt.n); len(got) != tt.want || (tt.want > 0 && !reflect.DeepEqual(got[len(got)-1], conversation[6])) {
			t.Errorf("lastMessages(%d) has %d messages, want the last %d", tt.n, len(got), tt.want)
		}
	}
}

func TestStopConditions(t *testing.T) {
	steps := []engine.StepResult{
		{StepNumber: 0, ToolCalls: []engine.ToolCall{{ToolName: "finalAnswer"}}},
		{StepNumber: 1, ToolCalls: []engine.ToolCall{{ToolName: "search"}}},
	}
	tests := []struct {
		name  string
		cond  engine.StopCondition
		steps []engine.StepResult
		want  bool
	}{
		{"hasToolCall looks at the last step", engine.StopCondition{Type: engine.StopHasToolCall, ToolName: "search"}, steps, true},
		{"hasToolCall ignores earlier steps", engine.StopCondition{Type: engine.StopHasToolCall, ToolName: "finalAnswer"}, steps, false},
		{"hasToolCall with no steps", engine.StopCondition{Type: engine.StopHasToolCall, ToolName: "search"}, nil, false},
		{"stepCountIs matches the count", engine.StopCondition{Type: engine.StopStepCount, Count: 2}, steps, true},
		{"stepCountIs is exact", engine.StopCondition{Type: engine.StopStepCount, Count: 1}, steps, false},
	}
	for _, tt := range tests {
		if got := stopMatches(tt.cond, tt.steps); got != tt.want {
			t.Errorf("%s: got %v", tt.name, got)
		}
	}
}

// TestHelpersInRules exercises the helpers through CEL.
func TestHelpersInRules(t *testing.T) {
	s := mustCompile(t, file("h.yaml", `
beforeStep:
  - name: helpers
    when: >-
      hasToolCall(step.steps, "search") && stepCountIs(step.steps, 1) &&
      pruneMessages(step.messages, "all").size() == 4 &&
      pruneMessages(step.messages, "all", ["weather"]).size() == 5 &&
      lastMessages(step.messages, 2)[0].content[0].toolName == "weather" &&
      textMessage("user", "hi").text == "hi"
    set:
      messages: pruneMessages(lastMessages(step.messages, 3), "before-last-message") + [textMessage("user", "go on")]
  - name: bad-mode
    when: step.stepNumber == 9
    set:
      messages: pruneMessages(step.messages, "sometimes")
`))
	sc := &engine.PrepareStepContext{Messages: conversation, Steps: []engine.StepResult{{ToolCalls: []engine.ToolCall{{ToolName: "search"}}}}}
	cfg, _, err := s.BeforeStep(context.Background(), sc, epoch)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.ModelMessage{conversation[4], conversation[5], conversation[6], text("user", "go on")}
	if cfg == nil || !reflect.DeepEqual(*cfg.Messages, want) {
		t.Fatalf("messages = %+v", cfg)
	}
	sc.StepNumber = 9
	if _, _, err := s.BeforeStep(context.Background(), sc, epoch); err == nil {
		t.Error("a bad pruneMessages mode evaluated without error")
	}
}
