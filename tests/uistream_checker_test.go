package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sse frames chunk lines as a UI message stream body.
func sse(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("data: " + l + "\n\n")
	}
	return b.String()
}

// TestUIStreamCheckerAcceptsGoldens reads the `ai` server's own reference
// streams (protocols.md A.6) and a framing variant: all must pass.
func TestUIStreamCheckerAcceptsGoldens(t *testing.T) {
	files, err := filepath.Glob("testdata/uistream/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden streams: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := readUIStream(strings.NewReader(string(data)))
			if err != nil {
				t.Fatalf("golden stream rejected: %v\n%s", err, s)
			}
			if last := s.Chunks[len(s.Chunks)-1].Type; last != "finish" && last != "abort" {
				t.Errorf("golden stream ends with %s, want finish or abort", last)
			}
		})
	}
}

// TestUIStreamCheckerRejects proves each protocol rule the e2e tests rely
// on is actually checked.
func TestUIStreamCheckerRejects(t *testing.T) {
	start, finish, done := `{"type":"start"}`, `{"type":"finish","finishReason":"stop"}`, `[DONE]`
	tests := []struct {
		name  string
		body  string
		known []string
		want  string
	}{
		{"start not first", sse(`{"type":"start-step"}`, start, finish, done), nil, "start-step before start"},
		{"second start", sse(start, start, finish, done), nil, "a second start"},
		{"delta without start", sse(start, `{"type":"text-delta","id":"a","delta":"x"}`, finish, done), nil, "outside its start/end"},
		{"delta after end", sse(start, `{"type":"text-start","id":"a"}`, `{"type":"text-end","id":"a"}`,
			`{"type":"text-delta","id":"a","delta":"x"}`, finish, done), nil, "outside its start/end"},
		{"reasoning end unknown", sse(start, `{"type":"reasoning-end","id":"r"}`, finish, done), nil, "is not open"},
		{"text left open", sse(start, `{"type":"text-start","id":"a"}`, finish, done), nil, "still open"},
		{"output for unknown call", sse(start, `{"type":"tool-output-available","toolCallId":"c1","output":1}`, finish, done), nil, "unknown tool call"},
		{"second output", sse(start, `{"type":"tool-input-available","toolCallId":"c1","toolName":"t","input":{}}`,
			`{"type":"tool-output-available","toolCallId":"c1","output":1}`,
			`{"type":"tool-output-error","toolCallId":"c1","errorText":"x"}`, finish, done), nil, "already has its output"},
		{"input delta without start", sse(start, `{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{"}`, finish, done), nil, "without an open tool-input-start"},
		{"bad finish reason", sse(start, `{"type":"finish","finishReason":"end_turn"}`, done), nil, "invalid finishReason"},
		{"unknown type", sse(start, `{"type":"tool-call"}`, finish, done), nil, "unknown chunk type"},
		{"missing field", sse(start, `{"type":"text-start"}`, finish, done), nil, "without string field \"id\""},
		{"not json", sse(start, `{"type":`, finish, done), nil, "not a JSON object"},
		{"no done", sse(start, finish), nil, "without data: [DONE]"},
		{"no finish", sse(start, done), nil, "[DONE] before any finish or abort"},
		{"chunk after done", sse(start, finish, done, `{"type":"start-step"}`), nil, "after [DONE]"},
		{"chunk after finish", sse(start, finish, `{"type":"start-step"}`, done), nil, "start-step after the stream's finish or abort"},
		{"nested step", sse(start, `{"type":"start-step"}`, `{"type":"start-step"}`, finish, done), nil, "inside an open step"},
		{"empty", "", nil, "empty stream"},
		{"chunk after abort", sse(start, `{"type":"abort"}`, finish, done), nil, "finish after the stream's finish or abort"},
		{"known id is not new", sse(start, `{"type":"tool-input-start","toolCallId":"c1","toolName":"t"}`, finish, done), []string{"c1"}, "already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readUIStream(strings.NewReader(tt.body), tt.known...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestUIStreamCheckerContinuation accepts the output of a tool call that an
// earlier response streamed (A.6 "continuation after approval").
func TestUIStreamCheckerContinuation(t *testing.T) {
	body := sse(`{"type":"start","messageId":"m1"}`,
		`{"type":"tool-output-available","toolCallId":"call_1","output":{"ok":true}}`,
		`{"type":"start-step"}`, `{"type":"text-start","id":"t2"}`, `{"type":"text-delta","id":"t2","delta":"Done."}`,
		`{"type":"text-end","id":"t2"}`, `{"type":"finish-step"}`, `{"type":"finish","finishReason":"stop"}`, `[DONE]`)
	s, err := readUIStream(strings.NewReader(body), "call_1")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.text(); got != "Done." {
		t.Errorf("text = %q, want Done.", got)
	}
	if s.messageID() != "m1" {
		t.Errorf("messageID = %q, want m1", s.messageID())
	}
}

// FuzzUIStreamReader feeds arbitrary bodies to the reader and checker: they
// must return (possibly with violations), never panic or hang.
func FuzzUIStreamReader(f *testing.F) {
	files, _ := filepath.Glob("testdata/uistream/*.sse")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(sse(`{"type":"start"}`, `{"type":"tool-output-available"}`, `[DONE]`))
	f.Fuzz(func(t *testing.T, body string) {
		s, err := readUIStream(strings.NewReader(body))
		if s == nil {
			t.Fatalf("nil stream (err %v)", err)
		}
		_ = s.toolCalls()
		_ = s.text()
	})
}
