package opa

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

func fullCall() *engine.ToolCallContext {
	tc := call("search", `{"query":"turngate","limit":12345678901234567890}`)
	tc.Depth = 1
	tc.EntryPath = engine.EntrySubAgent
	tc.StepNumber = 2
	tc.Dynamic = true
	tc.Tool = engine.ToolInfo{
		Name:        "search",
		Description: "Search the web.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`),
		Kind:        engine.ToolKindMCP,
		Server:      "websearch",
	}
	tc.Messages = make([]engine.ModelMessage, 3)
	tc.Body = map[string]any{"mode": "read-only", "n": 2, "tags": []any{"a"}}
	tc.PreviousCalls = []engine.ToolCallRecord{
		{ToolCallID: "call-0", ToolName: "lookup", Input: json.RawMessage(`{"id":1}`), StepNumber: 1, Decision: engine.DecisionBlock, Success: true},
		{ToolCallID: "call-00", ToolName: "noargs", StepNumber: 1, Decision: engine.DecisionAllow},
	}
	tc.Attachments = []engine.Attachment{
		{MediaType: "image/png", Filename: "dot.png", Size: 70},
		{MediaType: "application/pdf", Size: -1, Remote: true, URL: "https://example.com/a.pdf"},
	}
	return tc
}

// The input document, field by field (INPUT.md documents the same).
func TestToolCallInputDocument(t *testing.T) {
	got, err := json.MarshalIndent(ToolCallInput(fullCall()), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "tool_call_input.json"), string(got)+"\n")
}

func TestToolResultInputDocument(t *testing.T) {
	tc := fullCall()
	rc := &engine.ToolCallResultContext{
		Identity: tc.Identity, Type: "tool-call", ToolCallID: tc.ToolCallID, ToolName: tc.ToolName,
		Input: tc.Input, EffectiveInput: json.RawMessage(`{"query":"turngate","limit":50}`),
		Tool: tc.Tool, StepNumber: tc.StepNumber, Messages: tc.Messages, DurationMs: 12.5,
		Success: true, Output: json.RawMessage(`{"hits":[{"title":"x"}]}`), Decision: engine.DecisionRewrite, Executed: true,
	}
	got, err := json.MarshalIndent(ToolResultInput(rc), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "tool_result_input.json"), string(got)+"\n")
}

// Every documented path is visible to rules, with exact numbers.
func TestToolCallInputPaths(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"a.rego": pkg + `
block contains "all fields seen" if {
	input.tool.name == "search"
	input.tool.kind == "mcp"
	input.tool.server == "websearch"
	input.tool.description == "Search the web."
	input.tool.dynamic == true
	input.tool.input.limit == 12345678901234567890
	input.tool.schema.properties.query.type == "string"
	input.toolCallId == "call-1"
	input.stepNumber == 2
	input.agent == "support"
	input.sessionId == "sess-1"
	input.requestId == "req-1"
	input.entryPath == "subAgent"
	input.depth == 1
	input.principal == {"tenant": "acme", "subject": "alice", "roles": ["user"]}
	input.body.mode == "read-only"
	input.body.n == 2
	input.previousCalls[0] == {"toolName": "lookup", "toolCallId": "call-0", "input": {"id": 1}, "decision": "block", "success": true, "stepNumber": 1}
	input.previousCalls[1].input == {}
	input.messagesCount == 3
}`})
	for range 2 { // the second run reads the cached schema
		d, _, err := p.ToolCall(context.Background(), fullCall())
		if err != nil || d == nil || d.Reason != "all fields seen" {
			t.Fatalf("ToolCall = %+v, %v; want every input path matched", d, err)
		}
	}
}

func TestPrintOutputCaptured(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"a.rego": pkg + `block contains "x" if {
	print("tool called:", input.tool.name)
	false
}`})
	_, tr, err := p.ToolCall(context.Background(), call("search", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Prints) != 1 || tr.Prints[0] != "tool called: search" {
		t.Errorf("Prints = %q", tr.Prints)
	}
}

// One Policy serves concurrent turns (run with -race).
func TestConcurrentEvaluation(t *testing.T) {
	rf := loadDir(t, "testdata/cookbook")
	p, errs := Compile(rf.modules, rf.data, testOptions)
	if errs != nil {
		t.Fatal(errs)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				tc := call("search", `{"query":"go","limit":500}`)
				tc.Tool.InputSchema = json.RawMessage(`{"type":"object"}`)
				d, _, err := p.ToolCall(context.Background(), tc)
				if err != nil || d == nil || string(d.Input) != `{"query":"go","limit":50}` {
					t.Errorf("goroutine %d: ToolCall = %+v, %v", i, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestHasPackages(t *testing.T) {
	tests := []struct {
		name               string
		modules            map[string]string
		toolCall, toolRslt bool
	}{
		{"none", map[string]string{"a.rego": "package other\n\nx := 1\n"}, false, false},
		{"tool_call", map[string]string{"a.rego": pkg + "x := 1\n"}, true, false},
		{"both", map[string]string{"a.rego": pkg + "x := 1\n", "b.rego": resultPkg + "y := 1\n"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, testOptions, tt.modules)
			if p.HasToolCall() != tt.toolCall || p.HasToolResult() != tt.toolRslt {
				t.Errorf("HasToolCall, HasToolResult = %v, %v; want %v, %v", p.HasToolCall(), p.HasToolResult(), tt.toolCall, tt.toolRslt)
			}
		})
	}
}

func TestEmptyModule(t *testing.T) {
	_, errs := Compile([]policy.File{{Path: "empty.rego", Data: []byte("# nothing here\n")}}, nil, testOptions)
	if errs == nil || errs[0].Code != policy.CodeParse {
		t.Fatalf("errors = %v, want a parse error", errs)
	}
	t.Log(errs)
}
