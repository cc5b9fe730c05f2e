package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// checkGolden compares got with testdata/<name>, rewriting it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// collect drains a stream and renders its parts one JSON object a line.
func collect(t *testing.T, p engine.Provider, req *engine.ModelRequest) (string, []engine.StreamPart) {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	defer s.Close()
	var b strings.Builder
	var parts []engine.StreamPart
	for s.Next() {
		part := s.Current()
		parts = append(parts, part)
		line, err := json.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	return b.String(), parts
}

func user(text string) engine.ModelMessage {
	return engine.ModelMessage{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: text}}}
}

func toolTurn(callID, name, input, output string) []engine.ModelMessage {
	return []engine.ModelMessage{
		{Role: engine.RoleAssistant, Content: []engine.ContentPart{{Type: engine.ContentToolCall, ToolCallID: callID, ToolName: name, Input: json.RawMessage(input)}}},
		{Role: engine.RoleTool, Content: []engine.ContentPart{{Type: engine.ContentToolResult, ToolCallID: callID, ToolName: name, Output: json.RawMessage(output)}}},
	}
}

var demoTools = []engine.ToolInfo{
	{Name: "weather", Kind: engine.ToolKindHTTP, InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
	{Name: "search", Kind: engine.ToolKindHTTP, InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["query","limit"]}`)},
	{Name: "delete", Kind: engine.ToolKindHTTP, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
}

func TestDefaultScriptStreams(t *testing.T) {
	weatherThenResult := append([]engine.ModelMessage{user("What's the weather in Paris?")},
		toolTurn("call_0_0", "weather", `{"city":"Paris"}`, `{"city":"Paris","tempC":21}`)...)
	searchThenResult := append([]engine.ModelMessage{user("search go iterators")},
		toolTurn("call_0_0", "search", `{"limit":5,"query":"go iterators"}`, `"3 results"`)...)
	tests := []struct {
		name string
		req  engine.ModelRequest
	}{
		{"echo", engine.ModelRequest{Messages: []engine.ModelMessage{user("Hi there")}}},
		{"weather_call", engine.ModelRequest{Messages: []engine.ModelMessage{user("What's the weather in Paris?")}, Tools: demoTools}},
		{"weather_result", engine.ModelRequest{Messages: weatherThenResult, Tools: demoTools}},
		{"search_call", engine.ModelRequest{Messages: []engine.ModelMessage{user("search go iterators")}, Tools: demoTools}},
		{"search_result_default", engine.ModelRequest{Messages: searchThenResult, Tools: demoTools}},
		{"delete_call", engine.ModelRequest{Messages: []engine.ModelMessage{user("delete /tmp/x")}, Tools: demoTools}},
		{"think_reasoning", engine.ModelRequest{Messages: []engine.ModelMessage{user("think about tea")}}},
		{"tool_not_offered", engine.ModelRequest{Messages: []engine.ModelMessage{user("weather in Oslo")}, Tools: demoTools[1:]}},
		{"choice_none", engine.ModelRequest{Messages: []engine.ModelMessage{user("weather in Oslo")}, Tools: demoTools,
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceNone}}},
		{"choice_required_synthesised", engine.ModelRequest{Messages: []engine.ModelMessage{user("hello")}, Tools: demoTools[1:],
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceRequired}}},
		{"choice_tool_forced", engine.ModelRequest{Messages: []engine.ModelMessage{user("weather in Oslo")}, Tools: demoTools,
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "delete"}}},
		{"choice_tool_unoffered", engine.ModelRequest{Messages: []engine.ModelMessage{user("hello")}, Tools: demoTools[:1],
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "delete"}}},
		{"structured_output_sampled", engine.ModelRequest{Messages: []engine.ModelMessage{user("give me a person")},
			Output: &engine.OutputSpec{Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"kind":{"enum":["a","b"]}},"required":["name","age","kind"]}`)}}},
		{"second_turn_ids", engine.ModelRequest{Messages: append(weatherThenResult,
			engine.ModelMessage{Role: engine.RoleAssistant, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "ok"}}},
			user("weather in Rome")), Tools: demoTools}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := collect(t, Default(), &tt.req)
			checkGolden(t, filepath.Join("stream", tt.name+".golden"), got)
		})
	}
}

// TestScriptFeatures runs testdata/features.yaml: exact and substring
// matches, tool-result matches on output, structured output from the script.
func TestScriptFeatures(t *testing.T) {
	data, err := os.ReadFile("testdata/features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("features.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := New(s, WithChunkSize(1000))
	tests := []struct {
		name     string
		req      engine.ModelRequest
		wantRule string
		wantText string
	}{
		{"exact", engine.ModelRequest{Messages: []engine.ModelMessage{user("ping")}}, "exact", "pong"},
		{"exact does not match a longer text", engine.ModelRequest{Messages: []engine.ModelMessage{user("ping?")}}, "contains", "You said ping? (contains)"},
		{"tool result by output", engine.ModelRequest{Messages: append([]engine.ModelMessage{user("x")},
			toolTurn("c1", "lookup", `{}`, `"status: FAILED"`)...)}, "failed-lookup", "lookup said status: FAILED"},
		{"tool result of another tool is default", engine.ModelRequest{Messages: append([]engine.ModelMessage{user("x")},
			toolTurn("c1", "other", `{}`, `{"ok":true}`)...)}, "default", `The other tool returned: {"ok":true}`},
		{"structured output from script", engine.ModelRequest{Messages: []engine.ModelMessage{user("ping")},
			Output: &engine.OutputSpec{Schema: json.RawMessage(`{"type":"object"}`)}}, "exact", `{"answer":"pong","text":"ping"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, parts := collect(t, p, &tt.req)
			var text string
			for _, part := range parts {
				if part.Type == engine.StreamTextDelta {
					text += part.Text
				}
			}
			if text != tt.wantText {
				t.Errorf("text = %q, want %q", text, tt.wantText)
			}
			finish := parts[len(parts)-1]
			if want := `{"scripted":{"rule":"` + tt.wantRule + `"}}`; string(finish.ProviderMetadata) != want {
				t.Errorf("metadata = %s, want %s", finish.ProviderMetadata, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/parse/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no parse fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(filepath.Base(f), data)
			var errs policy.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want policy.Errors", err)
			}
			for _, e := range errs {
				if e.Location.Line == 0 {
					t.Errorf("error without a line: %v", e)
				}
			}
			checkGolden(t, filepath.Join("parse", name+".golden"), err.Error()+"\n")
		})
	}
}

func TestParseEmptyScriptEchoes(t *testing.T) {
	s, err := Parse("empty.yaml", nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	_, parts := collect(t, New(s, WithChunkSize(100)), &engine.ModelRequest{Messages: []engine.ModelMessage{user("hi")}})
	if parts[1].Text != "Echo: hi" {
		t.Errorf("got %q, want the echo", parts[1].Text)
	}
}

func TestChunkSize(t *testing.T) {
	_, parts := collect(t, Default(WithChunkSize(2)), &engine.ModelRequest{Messages: []engine.ModelMessage{user("héllo")}})
	var deltas []string
	for _, p := range parts {
		if p.Type == engine.StreamTextDelta {
			deltas = append(deltas, p.Text)
		}
	}
	want := []string{"Ec", "ho", ": ", "hé", "ll", "o"}
	if strings.Join(deltas, "|") != strings.Join(want, "|") {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
}

func TestCancelStopsStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Default(WithChunkDelay(time.Hour)).Stream(ctx, &engine.ModelRequest{Messages: []engine.ModelMessage{user("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Next() {
		t.Fatal("first part should come without delay")
	}
	// The next part waits an hour unless the cancellation interrupts it.
	go cancel()
	if s.Next() {
		t.Fatal("Next returned a part after cancellation")
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", s.Err())
	}
	if _, err := Default().Stream(ctx, &engine.ModelRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Stream on a done context = %v, want context.Canceled", err)
	}
}

func TestCloseStopsStream(t *testing.T) {
	s, err := Default(WithChunkDelay(time.Hour)).Stream(context.Background(), &engine.ModelRequest{Messages: []engine.ModelMessage{user("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	s.Next()
	go s.Close()
	if s.Next() {
		t.Fatal("Next returned a part after Close")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"a": "A", "city": "Paris"}
	lookup := func(n string) string { return vars[n] }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${a}${city}", "AParis"},
		{"cost $$5 and $x", "cost $5 and $x"},
		{"open ${a", "open ${a"},
		{"trailing $", "trailing $"},
		{"${missing}!", "!"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := expand(tt.in, lookup); got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/parse/*.yaml")
	for _, path := range append(append(seeds, more...), "default.yaml") {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		// A script that parses must answer without failing.
		st, err := New(s).Stream(context.Background(), &engine.ModelRequest{
			Messages: []engine.ModelMessage{user("weather in Paris")}, Tools: demoTools})
		if err != nil {
			t.Fatal(err)
		}
		for st.Next() {
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkStream(b *testing.B) {
	p := Default()
	req := &engine.ModelRequest{Messages: []engine.ModelMessage{user("What's the weather in Paris?")}, Tools: demoTools}
	for b.Loop() {
		s, _ := p.Stream(context.Background(), req)
		for s.Next() {
		}
		s.Close()
	}
}

// TestChunkDelaySchedule checks the pacing contract: part k is released no
// sooner than k × delay after the first, parts keep their order, and a
// consumer that falls behind still gets every part.
func TestChunkDelaySchedule(t *testing.T) {
	const delay = 2 * time.Millisecond
	req := &engine.ModelRequest{Messages: []engine.ModelMessage{user("hello there")}}
	_, want := collect(t, Default(), req)
	s, err := Default(WithChunkDelay(delay)).Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var start time.Time
	k := 0
	for ; s.Next(); k++ {
		if k == 0 {
			start = time.Now()
		} else if got, due := time.Since(start), time.Duration(k)*delay; got < due {
			t.Fatalf("part %d came %v after the first, before its due time %v", k, got, due)
		}
		if k >= len(want) || !reflect.DeepEqual(s.Current(), want[k]) {
			t.Fatalf("part %d = %+v, want the unpaced stream's", k, s.Current())
		}
		if k == 1 {
			// Fall behind by several parts: they are then overdue, not lost.
			time.Sleep(5 * delay)
		}
	}
	if k != len(want) {
		t.Errorf("%d parts, want %d", k, len(want))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
