package metrics

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// TestShadowEffects counts each fired shadow rule of any hook under its
// effect: a Rego rule's decision rule, a CEL rule's override.
func TestShadowEffects(t *testing.T) {
	m := New()
	m.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Shadow: &policy.Shadow{
		RulesFired: []string{"tools.rego#no deletes", "tools.rego#patch@12"},
		Effects:    map[string]string{"tools.rego#no deletes": "block", "tools.rego#patch@12": "patch"},
		Changed:    true,
	}})
	m.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Shadow: &policy.Shadow{
		RulesFired: []string{"tools.rego#no deletes"},
		Effects:    map[string]string{"tools.rego#no deletes": "block"},
	}})
	m.Record(&policy.Record{Hook: policy.HookBeforeTurn, Shadow: &policy.Shadow{RulesFired: []string{"turn.yaml#cap"}}})
	m.Record(&policy.Record{Hook: policy.HookToolResult}) // no shadow rules
	want := `
# HELP turngate_shadow_effects_total Shadow rules that fired (evaluated, never enforced), by hook, rule and would-be effect (block, substitute, patch, redact, override).
# TYPE turngate_shadow_effects_total counter
turngate_shadow_effects_total{effect="block",hook="beforeToolCall",rule="tools.rego#no deletes"} 2
turngate_shadow_effects_total{effect="override",hook="beforeTurn",rule="turn.yaml#cap"} 1
turngate_shadow_effects_total{effect="patch",hook="beforeToolCall",rule="tools.rego#patch@12"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_shadow_effects_total"); err != nil {
		t.Error(err)
	}
	// The same counts, as GET /v1/admin/rules shows them.
	wantCounts := []ShadowCount{
		{Rule: "tools.rego#no deletes", Hook: "beforeToolCall", Effect: "block", Count: 2},
		{Rule: "tools.rego#patch@12", Hook: "beforeToolCall", Effect: "patch", Count: 1},
		{Rule: "turn.yaml#cap", Hook: "beforeTurn", Effect: "override", Count: 1},
	}
	if got := m.ShadowCounts(); !slices.Equal(got, wantCounts) {
		t.Errorf("ShadowCounts() = %+v, want %+v", got, wantCounts)
	}
	if got := New().ShadowCounts(); got == nil || len(got) != 0 {
		t.Errorf("ShadowCounts() of a fresh registry = %#v, want empty, not nil", got)
	}
}

// TestToolLabels: once the gateway has named its tools, any other name a
// model or a client brings is counted as "other", never as a label of its
// own.
func TestToolLabels(t *testing.T) {
	m := New()
	m.SetToolNames(func(name string) bool { return name == "weather" })
	h := m.Hooks()
	for _, name := range []string{"weather", "x1", "x2", strings.Repeat("y", 300)} {
		h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{ToolName: name, Decision: engine.DecisionAllow})
	}
	m.Approvals.WithLabelValues(m.ToolLabel("tool-of-the-client"), "ignored").Inc()
	want := `
# HELP turngate_tool_calls_total Tool calls by tool ("other" for a name not configured) and decision (allow, rewrite, block, substitute, error, client, denied: its approval was denied or expired).
# TYPE turngate_tool_calls_total counter
turngate_tool_calls_total{decision="allow",tool="other"} 3
turngate_tool_calls_total{decision="allow",tool="weather"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.Approvals.WithLabelValues(OtherTool, "ignored")); got != 1 {
		t.Errorf("ignored approvals of other tools = %v, want 1", got)
	}
}

// TestSpecialisedCounters exports policy/opa's specialised evaluation
// counters.
func TestSpecialisedCounters(t *testing.T) {
	n, err := testutil.GatherAndCount(New().Gatherer(), "turngate_rego_specialised_hits_total",
		"turngate_rego_specialised_misses_total", "turngate_rego_specialised_fallbacks_total")
	if err != nil || n != 3 {
		t.Fatalf("%d series, %v; want 3", n, err)
	}
}

// TestTokenCounters adds each step's reported tokens to the agent's input
// (cached, uncached) and output counters; a step reporting none adds none.
func TestTokenCounters(t *testing.T) {
	m := New()
	h := m.Hooks()
	for _, u := range []engine.Usage{{InputTokens: 100, CachedInputTokens: 40, OutputTokens: 7}, {InputTokens: 10, OutputTokens: 5}, {}} {
		h.OnStepFinish(context.Background(), &engine.StepResult{Identity: engine.Identity{Agent: "demo"}, Usage: u})
	}
	want := `
# HELP turngate_output_tokens_total Output tokens reported by the providers, by agent.
# TYPE turngate_output_tokens_total counter
turngate_output_tokens_total{agent="demo"} 12
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_output_tokens_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.InputTokens.WithLabelValues("demo", "uncached")); got != 70 {
		t.Errorf("turngate_input_tokens_total{kind=uncached} = %v, want 70", got)
	}
}
