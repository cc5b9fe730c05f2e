package rulestate_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/store/storetest"
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

// statementCount counts the statements a PostgreSQL store sends.
type statementCount struct{ n atomic.Int64 }

func (c *statementCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestOneRoundTripPerCall: on PostgreSQL, an allowed tool call whose
// rules read 3 counters is one statement (a blocked one adds its
// settlement).
func TestOneRoundTripPerCall(t *testing.T) {
	count := &statementCount{}
	st, err := store.OpenPostgres(context.Background(), storetest.Schema(t), store.WithTracer(count))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rev, errs := ruleset.Load("testdata/bench", ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	h := rulestate.New(st, rulestate.Options{}).Hooks(rev, rev.Hooks(nil, ruleset.FailClosed))
	tc := &engine.ToolCallContext{Identity: alice, Type: "tool-call", ToolCallID: "c", ToolName: "search",
		Input: json.RawMessage(`{"query": "go"}`), Tool: engine.ToolInfo{Name: "search", Kind: engine.ToolKindBuiltin}}
	count.n.Store(0)
	if d, err := h.BeforeToolCall(context.Background(), tc); err != nil || d != nil {
		t.Fatalf("decision %+v, %v; want allow", d, err)
	}
	if n := count.n.Load(); n != 1 {
		t.Fatalf("an allowed call with 3 counters sent %d statements, want 1", n)
	}
}
