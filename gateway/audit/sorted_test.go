package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// TestEncodeWithoutRedaction checks that the single-marshal encoding writes
// the same bytes as the map round trip that redaction needs; a decision
// record, written in key order as it is encoded (appendDecision), the
// same bytes when its input is in key order.
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
			fast, err := newLog(nil, nil, nil).encode(newLineBuf(), tc.kind, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip, err := newLog(nil, []string{"no.such.field"}, nil).encode(newLineBuf(), tc.kind, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fast, roundTrip) {
				t.Errorf("single marshal:\n%s\nround trip:\n%s", fast, roundTrip)
			}
		})
	}
}

// appendSortedPerObject is appendSorted as it was before its members
// shared one scratch slice: it sorts a new []member per object.
// appendSorted must write the same bytes, duplicate keys included.
func appendSortedPerObject(dst, v []byte, extra *member) []byte {
	switch v[0] {
	case '{':
		ms := appendMembers(nil, v)
		if extra != nil {
			ms = append(ms, *extra)
		}
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.sortKey, b.sortKey) })
		dst = append(dst, '{')
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, m.key...)
			dst = append(dst, ':')
			dst = appendSortedPerObject(dst, m.val, nil)
		}
		return append(dst, '}')
	case '[':
		dst = append(dst, '[')
		for i := 1; v[i] != ']'; {
			end := valueEnd(v, i)
			dst = appendSortedPerObject(dst, v[i:end], nil)
			if v[end] == ',' {
				dst = append(dst, ',')
				end++
			}
			i = end
		}
		return append(dst, ']')
	}
	return append(dst, v...)
}

// wideObject returns a JSON object of n members with keys in reverse
// order, each value made by val.
func wideObject(n int, val func(i int) string) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%q:%s", fmt.Sprintf("k%03d", i), val(i))
		if i > 0 {
			b.WriteByte(',')
		}
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// TestEncodeMatchesPerObjectSort checks that encode writes what sorting a
// new member slice per object wrote, for records whose members fit the
// stack scratch space and records that spill it: wide and deep objects,
// objects in arrays, and duplicate keys in more members than insertion
// sort handles. A decision record's input is as the evaluation rendered
// it (those here have none), so its lines are the same.
func TestEncodeMatchesPerObjectSort(t *testing.T) {
	step := 3
	inner := wideObject(20, func(i int) string { return fmt.Sprintf(`{"z":%d,"a":[{"y":1,"b":2}]}`, i) })
	dups := json.RawMessage(`{"b":1,"a":1,"b":2,"c":1,"a":2,"b":3,"d":1,"a":3,"e":1,"b":4,"a":4,"f":1,"a":5,"b":5}`)
	tests := []struct {
		name string
		kind string
		v    any
	}{
		{"benchmark decision", KindDecision, &policy.Record{Time: time.Unix(1700000000, 0).UTC(), Hook: policy.HookBeforeToolCall,
			Revision: "sha256:0f1e", RequestID: "req_1", SessionID: "chat_1", Agent: "demo", Tenant: "acme", StepNumber: &step,
			ToolCallID: "call_1_0", ToolName: "search", Outcome: policy.OutcomeMatched, RulesFired: []string{"data.turngate.tool_call.patch"},
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"query":"turngate","limit":50}`)}, DurationMicros: 41}},
		{"wide decision", KindDecision, &policy.Record{Hook: policy.HookBeforeStep, Outcome: policy.OutcomeMatched,
			SetBy:    map[string]string{"temperature": "a.yaml#t", "model": "b.yaml#m"},
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: wideObject(40, func(i int) string { return fmt.Sprint(i) })}}},
		{"deep decision", KindDecision, &policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeMatched,
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: inner, Output: json.RawMessage(`[` + string(inner) + `,` + string(inner) + `]`)}}},
		{"duplicate keys", KindDecision, &policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeMatched,
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: dups, Output: wideObject(14, func(int) string { return string(dups) })}}},
		{"turn with many tool calls", KindTurn, &Turn{RequestID: "r1", Tenant: "t", SessionID: "s", Agent: "demo", Status: "completed", Steps: 9,
			ToolCalls: slices.Repeat([]engine.ToolResult{
				{ToolCallID: "c1", ToolName: "weather", Input: json.RawMessage(`{"city":"Lisbon","units":"c"}`), Output: json.RawMessage(`{"weather":"rainy","tempC":-5.5,"city":"Lisbon"}`), Decision: "allow"},
				{ToolCallID: "c2", ToolName: "search", Input: json.RawMessage(`{"query":"a \"quoted\" \\ word\n","limit":2}`), IsError: true, ErrorText: "boom", Decision: "deny"},
			}, 12),
			Usage: engine.Usage{InputTokens: 240, OutputTokens: 105, TotalTokens: 345, ReasoningTokens: 7}, DurationMs: 7.442}},
		{"other kind", "custom", &Turn{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newLog(nil, nil, nil).encode(newLineBuf(), tc.kind, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			kind := member{key: kindKey, sortKey: kindKey[1:5], val: []byte(`"` + tc.kind + `"`)}
			want := append(appendSortedPerObject(nil, raw, &kind), '\n')
			if !bytes.Equal(got, want) {
				t.Errorf("shared scratch:\n%s\nper object:\n%s", got, want)
			}
		})
	}
}

// FuzzAppendSorted checks that reordering any marshalled JSON keeps it
// valid and equal in content, that a second pass changes nothing, and
// that it writes what sorting per object did, with and without an extra
// member.
func FuzzAppendSorted(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[{"d":null,"c":"x"}]}`, `[]`, `"s\"t"`, `{"\u00e9":1,"e":{}}`, `{"a":1,"a":2}`, `-1.5e3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := json.Marshal(json.RawMessage(data))
		if err != nil {
			return
		}
		out, _ := appendSorted(nil, raw, nil, nil)
		want, err := decodeNumbers(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeNumbers(out)
		if err != nil {
			t.Fatalf("invalid output %s: %v", out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("content changed: %s became %s", raw, out)
		}
		if again, _ := appendSorted(nil, out, nil, nil); !bytes.Equal(again, out) {
			t.Fatalf("not stable: %s became %s", out, again)
		}
		if want := appendSortedPerObject(nil, raw, nil); !bytes.Equal(out, want) {
			t.Fatalf("%s became %s, per object %s", raw, out, want)
		}
		var scratch [4]member
		extra := member{key: kindKey, sortKey: kindKey[1:5], val: quotedKind(KindTurn)}
		withKind, ms := appendSorted(nil, raw, &extra, scratch[:2])
		if want := appendSortedPerObject(nil, raw, &extra); !bytes.Equal(withKind, want) || len(ms) != 2 {
			t.Fatalf("%s with kind became %s (scratch left at %d), per object %s", raw, withKind, len(ms), want)
		}
	})
}

// decodeNumbers decodes the JSON value b keeping numbers as written, as
// some valid ones (1e400) do not fit a float64.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// topLevelKeys returns the top-level keys of the JSON object line, in
// the order written.
func topLevelKeys(t *testing.T, line []byte) []string {
	t.Helper()
	var keys []string
	for _, m := range appendMembers(nil, bytes.TrimSuffix(line, []byte("\n"))) {
		keys = append(keys, string(m.sortKey))
	}
	return keys
}
