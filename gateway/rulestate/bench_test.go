package rulestate_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
	"github.com/turngate/turngate/policy/state"
)

// BenchmarkDecisionPathState measures what 3 declared counters read by a
// tool call's rules add to its decision (beside policy/opa's
// BenchmarkDecisionPath): the gateway's path (Tracker.Hooks: admit in the
// SQLite store, evaluate, settle) against the same rules evaluated with
// the same values already in the input, interleaved so the machine's
// noise falls on both. It reports each one's median and the p50 overhead.
func BenchmarkDecisionPathState(b *testing.B) {
	rev, errs := ruleset.Load("testdata/bench", ruleset.Options{})
	if errs != nil {
		b.Fatal(errs)
	}
	if got := len(rev.StateReads(policy.HookBeforeToolCall)); got != 3 {
		b.Fatalf("the rules read %d states, want 3", got)
	}
	st := openSQLite(b)
	inner := rev.Hooks(nil, ruleset.FailClosed)
	withState := rulestate.New(st, rulestate.Options{}).Hooks(rev, inner)
	ctx := context.Background()
	call := func(i int) *engine.ToolCallContext {
		return &engine.ToolCallContext{Identity: alice, Type: "tool-call", ToolCallID: "c", ToolName: "search",
			Input: json.RawMessage(`{"query": "go"}`), Tool: engine.ToolInfo{Name: "search", Kind: engine.ToolKindBuiltin}}
	}
	fixed := map[string]any{"calls_per_minute": json.Number("7"), "session_calls": json.Number("7"), "tool_calls_today": json.Number("7")}
	var with, without []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		runs := []func(){
			func() {
				tc := call(i)
				start := time.Now()
				if _, err := withState.BeforeToolCall(ctx, tc); err != nil {
					b.Fatal(err)
				}
				with = append(with, time.Since(start))
			},
			func() {
				tc := call(i)
				tc.State = fixed
				start := time.Now()
				if _, err := inner.BeforeToolCall(ctx, tc); err != nil {
					b.Fatal(err)
				}
				without = append(without, time.Since(start))
			},
		}
		if i%2 == 1 {
			slices.Reverse(runs)
		}
		for _, r := range runs {
			r()
		}
	}
	w, wo := median(with), median(without)
	b.ReportMetric(float64(w.Microseconds()), "state-p50-µs")
	b.ReportMetric(float64(wo.Microseconds()), "nostate-p50-µs")
	b.ReportMetric(float64((w - wo).Microseconds()), "overhead-p50-µs")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// TestNoStateReadNoStoreAccess: an event that no declaration counts and
// whose rules read no state costs no store access and no allocation.
func TestNoStateReadNoStoreAccess(t *testing.T) {
	tr := rulestate.New(nil, rulestate.Options{}) // a store access would panic
	set := mustSet(t, &state.Decl{Name: "emails", Kind: state.Count, Of: state.ToolCalls, Tools: []string{"send_email"},
		Window: state.Window{Within: time.Hour}})
	ev := &rulestate.Event{Kind: state.EventToolCall, Identity: alice, Tool: "search"}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if v, p, err := tr.Admit(ctx, ev, nil, set); v != nil || p != nil || err != nil {
			t.Fatal(v, p, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per event, want 0", allocs)
	}
}
