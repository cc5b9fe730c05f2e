package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// What the Log writes, the Reader reads back: decision records with their
// decision and input intact (redactions applied), the chain-start and turn
// records skipped.
func TestReadBack(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, []string{"input.tool.input.password"}, slog.New(slog.DiscardHandler))
	step := 1
	l.Record(&policy.Record{Time: time.Unix(0, 0).UTC(), Hook: policy.HookBeforeToolCall, SessionID: "s1", StepNumber: &step,
		ToolName: "login", Outcome: policy.OutcomeMatched, RulesFired: []string{"data.turngate.tool_call.patch"},
		Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"limit":12345678901234567890}`)},
		Input:    json.RawMessage(`{"tool":{"name":"login","input":{"user":"ann","password":"hunter2"}}}`)})
	l.Turn(&Turn{SessionID: "s1", Status: "completed"})
	l.Record(&policy.Record{Hook: policy.HookBeforeTurn, Outcome: policy.OutcomeNoMatch})
	l.Flush()

	r := NewReader(&buf)
	first, line, err := r.Next()
	if err != nil || line != 2 {
		t.Fatalf("Next: line %d, %v", line, err)
	}
	if got := string(first.Decision.(json.RawMessage)); got != `{"action":"allow","input":{"limit":12345678901234567890}}` {
		t.Errorf("decision = %s", got)
	}
	if got := string(first.Input); strings.Contains(got, "hunter2") || !strings.Contains(got, `"password":"[REDACTED]"`) {
		t.Errorf("input = %s, want the password redacted", got)
	}
	second, line, err := r.Next()
	if err != nil || line != 4 || second.Hook != policy.HookBeforeTurn || second.Decision != nil {
		t.Fatalf("second record: %+v at line %d, %v", second, line, err)
	}
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last record: %v, want io.EOF", err)
	}
	if r.Skipped != 2 {
		t.Errorf("skipped %d lines, want 2 (the chain-start and the turn record)", r.Skipped)
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"not JSON", `time=2025 level=INFO msg=started`, "not an audit line"},
		{"truncated", `{"kind":"decision","hook":"beforeTu`, "not an audit line"},
		{"array", `[1, 2]`, "not an audit line"},
		{"wrong field type", `{"kind":"decision","hook":"beforeTurn","stepNumber":"one"}`, "decision record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseLine([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, line := range []string{"", "   ", `{"kind":"turn","status":"completed"}`, `{"msg":"other"}`} {
		if rec, err := ParseLine([]byte(line)); rec != nil || err != nil {
			t.Errorf("ParseLine(%q) = %v, %v; want skipped", line, rec, err)
		}
	}
}

// FuzzParseLine: any line parses to a record, to nothing or to an error,
// never a panic, and a record marshals again.
func FuzzParseLine(f *testing.F) {
	var buf bytes.Buffer
	l := New(&buf, nil, slog.New(slog.DiscardHandler))
	l.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeMatched,
		Decision: &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no"},
		Input:    json.RawMessage(`{"tool":{"name":"delete","input":{}},"body":{"mode":"read-only"}}`)})
	l.Turn(&Turn{SessionID: "s1"})
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`{"kind":"decision","decision":null,"input":"[REDACTED]"}`))
	f.Add([]byte(`{"kind":"decision","stepNumber":1e400}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseLine(line)
		if err != nil || rec == nil {
			return
		}
		if _, err := json.Marshal(rec); err != nil {
			t.Errorf("record of %q does not marshal: %v", line, err)
		}
	})
}
