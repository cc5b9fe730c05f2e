package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// TestEncodeWithoutRedaction checks that the single-marshal encoding writes
// the same bytes as the map round trip that redaction needs.
func TestEncodeWithoutRedaction(t *testing.T) {
	step := 2
	tests := []struct {
		name string
		kind string
		v    any
	}{
		{"decision with a map", KindDecision, &policy.Record{Time: time.Unix(1700000000, 5).UTC(), Hook: policy.HookBeforeToolCall,
			Revision: "sha256:1", RequestID: "r1", Tenant: "t", StepNumber: &step, ToolCallID: "c1", ToolName: "search",
			ToolKind: "builtin", Outcome: policy.OutcomeMatched, RulesFired: []string{"b", "a"},
			SetBy:          map[string]string{"z": "1", "a\"b": "2", "é": "3", "<tag>": "4"},
			Decision:       map[string]any{"action": "allow", "input": map[string]any{"q": "x & y", "limit": 5, "nested": []any{map[string]any{"b": nil, "a": true}}}},
			DurationMicros: 41}},
		{"decision with a struct", KindDecision, &policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeMatched,
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"query":"turngate","limit":50,"a":{"y":[],"x":{}}}`)}}},
		{"turn with tool calls", KindTurn, &Turn{RequestID: "r1", Tenant: "t", SessionID: "s", Agent: "demo", Status: "completed", Steps: 2,
			ToolCalls: []engine.ToolResult{
				{ToolCallID: "c1", ToolName: "weather", Input: json.RawMessage(`{"city":"Lisbon"}`), Output: json.RawMessage(`{"weather":"rainy","tempC":-5.5,"city":"Lisbon"}`), Decision: "allow"},
				{ToolCallID: "c2", ToolName: "search", Input: json.RawMessage(`{"query":"a \"quoted\" \\ word\n","limit":2}`), IsError: true, ErrorText: "boom", Decision: "deny"},
			},
			Usage: engine.Usage{InputTokens: 240, OutputTokens: 105, TotalTokens: 345}, DurationMs: 7.442}},
		{"empty turn", KindTurn, &Turn{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fast, err := New(nil, nil, nil).encode(tc.kind, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip, err := New(nil, []string{"no.such.field"}, nil).encode(tc.kind, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fast, roundTrip) {
				t.Errorf("single marshal:\n%s\nround trip:\n%s", fast, roundTrip)
			}
		})
	}
}

// FuzzAppendSorted checks that reordering any marshalled JSON keeps it
// valid and equal in content, and that a second pass changes nothing.
func FuzzAppendSorted(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[{"d":null,"c":"x"}]}`, `[]`, `"s\"t"`, `{"\u00e9":1,"e":{}}`, `{"a":1,"a":2}`, `-1.5e3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := json.Marshal(json.RawMessage(data))
		if err != nil {
			return
		}
		out := appendSorted(nil, raw, nil)
		var want, got any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("invalid output %s: %v", out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("content changed: %s became %s", raw, out)
		}
		if again := appendSorted(nil, out, nil); !bytes.Equal(again, out) {
			t.Fatalf("not stable: %s became %s", out, again)
		}
	})
}
