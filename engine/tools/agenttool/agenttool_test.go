package agenttool_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/agenttool"
)

func TestExecuteDepthLimit(t *testing.T) {
	tests := []struct {
		name        string
		maxDepth    int
		parentDepth int
		wantErr     string
	}{
		{name: "top level may call", maxDepth: 1, parentDepth: 0},
		{name: "limit reached", maxDepth: 1, parentDepth: 1, wantErr: "sub-agent depth limit 1 reached"},
		{name: "default allows three levels", maxDepth: 0, parentDepth: 2},
		{name: "default stops the fourth", maxDepth: 0, parentDepth: 3, wantErr: "sub-agent depth limit 3 reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			runner := agenttool.RunnerFunc(func(context.Context, agenttool.Request) (json.RawMessage, error) {
				ran = true
				return json.RawMessage(`"done"`), nil
			})
			ex, err := agenttool.New(agenttool.Config{Agent: "researcher", MaxDepth: tt.maxDepth}, runner)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ex.Execute(context.Background(), engine.ToolExecution{Identity: engine.Identity{Depth: tt.parentDepth}})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if ran {
					t.Error("the sub-agent ran past the depth limit")
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("error = %v, ran = %v", err, ran)
			}
		})
	}
}

func TestExecutePassesTheCall(t *testing.T) {
	parent := engine.Identity{RequestID: "req-1", SessionID: "sess-1", Agent: "main", Depth: 0,
		Principal: engine.Principal{Tenant: "acme", Subject: "ada"}, EntryPath: engine.EntryChat}
	var got agenttool.Request
	runner := agenttool.RunnerFunc(func(_ context.Context, req agenttool.Request) (json.RawMessage, error) {
		got = req
		return json.RawMessage(`"the answer"`), nil
	})
	ex, err := agenttool.New(agenttool.Config{Agent: "researcher"}, runner)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Execute(context.Background(), engine.ToolExecution{
		Identity: parent, ToolCallID: "call-7", ToolName: "ask_researcher", Input: json.RawMessage(`{"prompt":"why?"}`),
	})
	if err != nil || string(out) != `"the answer"` {
		t.Fatalf("Execute = %s, %v", out, err)
	}
	want := agenttool.Request{Parent: parent, ToolCallID: "call-7", Agent: "researcher", Input: json.RawMessage(`{"prompt":"why?"}`)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request = %+v, want %+v", got, want)
	}
}

func TestExecuteErrorsAndCancellation(t *testing.T) {
	runner := agenttool.RunnerFunc(func(ctx context.Context, req agenttool.Request) (json.RawMessage, error) {
		if agenttool.Prompt(req.Input) == "fail" {
			return nil, errors.New("turn failed: upstream unavailable")
		}
		<-ctx.Done() // a long sub-agent turn, ended by its parent
		return nil, ctx.Err()
	})
	ex, err := agenttool.New(agenttool.Config{Agent: "researcher"}, runner)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Execute(context.Background(), engine.ToolExecution{Input: json.RawMessage(`{"prompt":"fail"}`)})
	if err == nil || err.Error() != "sub-agent researcher: turn failed: upstream unavailable" {
		t.Errorf("error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ex.Execute(ctx, engine.ToolExecution{Input: json.RawMessage(`{"prompt":"wait"}`)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	runner := agenttool.RunnerFunc(func(context.Context, agenttool.Request) (json.RawMessage, error) { return nil, nil })
	tests := []struct {
		name    string
		cfg     agenttool.Config
		runner  agenttool.Runner
		wantErr string
	}{
		{name: "no agent", cfg: agenttool.Config{}, runner: runner, wantErr: "agent: required"},
		{name: "negative depth", cfg: agenttool.Config{Agent: "a", MaxDepth: -1}, runner: runner, wantErr: "maxDepth: must not be negative"},
		{name: "no runner", cfg: agenttool.Config{Agent: "a"}, wantErr: "no sub-agent runner configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agenttool.New(tt.cfg, tt.runner)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{name: "prompt field", input: `{"prompt":"summarise this"}`, want: "summarise this"},
		{name: "empty prompt", input: `{"prompt":""}`, want: ""},
		{name: "custom schema", input: `{"city":"Paris"}`, want: `{"city":"Paris"}`},
		{name: "non-string prompt", input: `{"prompt":3}`, want: `{"prompt":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agenttool.Prompt(json.RawMessage(tt.input)); got != tt.want {
				t.Errorf("Prompt = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSessionID(t *testing.T) {
	if got := agenttool.SessionID(engine.Identity{SessionID: "sess-1"}, "call-7"); got != "sess-1:call-7" {
		t.Errorf("SessionID = %q", got)
	}
}

func TestTurnOutput(t *testing.T) {
	tests := []struct {
		name    string
		res     engine.TurnResult
		want    string
		wantErr string
	}{
		{name: "last step text", want: `"final answer"`, res: engine.TurnResult{Status: engine.StatusCompleted,
			Steps: []engine.StepResult{{Text: "let me look"}, {Text: "final answer"}}}},
		{name: "last step without text", want: `"let me look"`, res: engine.TurnResult{Status: engine.StatusCompleted,
			Steps: []engine.StepResult{{Text: "let me look"}, {Text: ""}}}},
		{name: "message text when no steps", want: `"from the message"`, res: engine.TurnResult{Status: engine.StatusCompleted,
			Message: engine.UIMessage{Parts: []engine.UIPart{{Type: engine.PartStepStart}, {Type: engine.PartText, Text: "from the message"}}}}},
		{name: "no text", want: `""`, res: engine.TurnResult{Status: engine.StatusCompleted}},
		{name: "structured output wins", want: `{"score":7}`, res: engine.TurnResult{Status: engine.StatusCompleted,
			Output: json.RawMessage(`{"score":7}`), Steps: []engine.StepResult{{Text: `{"score":7}`}}}},
		{name: "error", wantErr: "turn failed: model unavailable", res: engine.TurnResult{Status: engine.StatusError, Error: "model unavailable"}},
		{name: "error without text", wantErr: "turn failed: unknown error", res: engine.TurnResult{Status: engine.StatusError}},
		{name: "aborted", wantErr: "turn aborted", res: engine.TurnResult{Status: engine.StatusAborted}},
		{name: "client tool pending", wantErr: `turn stopped on client tool call "confirm", which a sub-agent cannot run`,
			res: engine.TurnResult{Status: engine.StatusCompleted, PendingToolCalls: []engine.ToolCall{{ToolName: "confirm"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := agenttool.TurnOutput(&tt.res)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Errorf("TurnOutput = %s, %v; want %s", out, err, tt.want)
			}
		})
	}
}
