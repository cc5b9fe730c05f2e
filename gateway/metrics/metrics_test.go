package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
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
		h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{ToolName: name, Decision: engine.DecisionAllow, Executed: true, DurationMs: 3})
	}
	m.Approvals.WithLabelValues(m.ToolLabel("tool-of-the-client"), "ignored").Inc()
	want := `
# HELP turngate_tool_calls_total Tool calls by tool ("other" for a name not configured), tenant and decision (allow, rewrite, block, substitute, error, client, denied: its approval was denied or expired).
# TYPE turngate_tool_calls_total counter
turngate_tool_calls_total{decision="allow",tenant="",tool="other"} 3
turngate_tool_calls_total{decision="allow",tenant="",tool="weather"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if got := labelValues(t, m, "turngate_tool_call_duration_seconds", "tool"); !slices.Equal(got, []string{"other", "weather"}) {
		t.Errorf("tool_call_duration_seconds tools = %q, want other and weather", got)
	}
	if got := testutil.ToFloat64(m.Approvals.WithLabelValues(Other, "ignored")); got != 1 {
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
# HELP turngate_output_tokens_total Output tokens reported by the providers, by agent and tenant.
# TYPE turngate_output_tokens_total counter
turngate_output_tokens_total{agent="demo",tenant=""} 12
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_output_tokens_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.InputTokens.WithLabelValues("demo", "", "uncached")); got != 70 {
		t.Errorf("turngate_input_tokens_total{kind=uncached} = %v, want 70", got)
	}
}

// TestTenantLabels: once the gateway has named its tenants, a turn, a
// decision, a tool call or a step of any other tenant is counted as
// "other": a tenant an identity provider or a token names never becomes a
// label value of its own.
func TestTenantLabels(t *testing.T) {
	m := New()
	m.SetTenants([]string{"acme", "globex"})
	h := m.Hooks()
	for _, tenant := range []string{"acme", "initech-7f3c9a", "x' OR 1=1", strings.Repeat("t", 300), ""} {
		id := engine.Identity{Agent: "demo", Principal: engine.Principal{Tenant: tenant}}
		m.Turn("demo", tenant, engine.StatusCompleted, time.Second)
		m.Record(&policy.Record{Hook: policy.HookBeforeTurn, Tenant: tenant, Outcome: policy.OutcomeNoMatch})
		h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{Identity: id, ToolName: "weather", Decision: engine.DecisionAllow})
		h.OnStepFinish(context.Background(), &engine.StepResult{Identity: id, Usage: engine.Usage{InputTokens: 10, OutputTokens: 1}})
	}
	for _, name := range []string{"turngate_turns_total", "turngate_decisions_total", "turngate_tool_calls_total",
		"turngate_input_tokens_total", "turngate_output_tokens_total"} {
		if got := labelValues(t, m, name, "tenant"); !slices.Equal(got, []string{"acme", "other"}) {
			t.Errorf("%s tenants = %q, want acme and other", name, got)
		}
	}
	want := `
# HELP turngate_turns_total Turns by agent, tenant ("other" for one not configured) and final status (completed, error, aborted, skipped).
# TYPE turngate_turns_total counter
turngate_turns_total{agent="demo",status="completed",tenant="acme"} 1
turngate_turns_total{agent="demo",status="completed",tenant="other"} 4
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_turns_total"); err != nil {
		t.Error(err)
	}
}

// TestHTTPRoutes: a request is observed under its route's template, never
// its path with the ids in it; any path no route matches is one
// "unmatched" series, and a made-up method one "other".
func TestHTTPRoutes(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := New()
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(m.HTTP())
	r.GET("/v1/agents/:agent/sessions/:id/messages", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/console/*page", func(c *gin.Context) { c.Status(http.StatusOK) })
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/agents/demo/sessions/s-1/messages"},
		{"GET", "/v1/agents/support/sessions/8d0c2f61-secret/messages"},
		{"GET", "/console/sessions/abc"},
		{"GET", "/v1/agents/demo/sessions/s-1/nope"},
		{"GET", "/wp-admin/" + strings.Repeat("a", 200)},
		{"POST", "/v1/agents/demo/sessions/s-1/messages"},
		{"BREW", "/v1/agents/demo/sessions/s-1/messages"},
	} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
	}
	if got, want := labelValues(t, m, "turngate_http_request_duration_seconds", "route"),
		[]string{"/console/*page", "/v1/agents/:agent/sessions/:id/messages", UnmatchedRoute}; !slices.Equal(got, want) {
		t.Errorf("routes = %q, want %q", got, want)
	}
	if got, want := labelValues(t, m, "turngate_http_request_duration_seconds", "method"), []string{"GET", "POST", Other}; !slices.Equal(got, want) {
		t.Errorf("methods = %q, want %q", got, want)
	}
	if got, want := labelValues(t, m, "turngate_http_request_duration_seconds", "status"), []string{"200", "404", "405"}; !slices.Equal(got, want) {
		t.Errorf("statuses = %q, want %q", got, want)
	}
	if n := testutil.CollectAndCount(m.HTTPDuration); n != 5 {
		t.Errorf("%d request series, want 5 (templated route×method×status)", n)
	}
}

// TestScrapeGauges: the last rules reload's rejection and the pending
// approvals are read when /metrics is scraped; a failed read leaves the
// approvals out of that scrape rather than report a wrong zero.
func TestScrapeGauges(t *testing.T) {
	m := New()
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP turngate_rule_reload_rejected 1 when the last rules reload was rejected (the last good revision serves), else 0.
# TYPE turngate_rule_reload_rejected gauge
turngate_rule_reload_rejected 0
`), "turngate_rule_reload_rejected", "turngate_approvals_pending"); err != nil {
		t.Error(err)
	}
	rejected, fail := true, error(nil)
	m.SetSources(Sources{
		RulesRejected: func() bool { return rejected },
		PendingApprovals: func(context.Context) (map[string]int, error) {
			return map[string]int{"acme": 3, "globex": 0}, fail
		},
	})
	want := `
# HELP turngate_approvals_pending Tool-call approvals waiting for an approver, by tenant (read from the store at scrape time: the same on every replica).
# TYPE turngate_approvals_pending gauge
turngate_approvals_pending{tenant="acme"} 3
turngate_approvals_pending{tenant="globex"} 0
# HELP turngate_rule_reload_rejected 1 when the last rules reload was rejected (the last good revision serves), else 0.
# TYPE turngate_rule_reload_rejected gauge
turngate_rule_reload_rejected 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_rule_reload_rejected", "turngate_approvals_pending"); err != nil {
		t.Error(err)
	}
	rejected, fail = false, errors.New("store down")
	if n, err := testutil.GatherAndCount(m.Gatherer(), "turngate_approvals_pending"); err != nil || n != 0 {
		t.Errorf("%d pending approval series when the store fails, %v; want none", n, err)
	}
	if got := m.rulesRejected(); got != 0 {
		t.Errorf("rule_reload_rejected = %v after a good reload, want 0", got)
	}
}

// TestRuleFailures: each hook's series of the failure policy exists at
// zero from the start, and a failed evaluation counts under its hook.
func TestRuleFailures(t *testing.T) {
	m := New()
	m.SetFailurePolicy("fail-closed")
	m.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeError, Tenant: "acme"})
	m.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeMatched, Tenant: "acme"})
	want := `
# HELP turngate_rule_failures_total Rule evaluations that failed, by hook and the failure policy that decided: fail-closed (the turn or tool call failed) or fail-open (it went on unchecked).
# TYPE turngate_rule_failures_total counter
turngate_rule_failures_total{hook="beforePersist",policy="fail-closed"} 0
turngate_rule_failures_total{hook="beforeStep",policy="fail-closed"} 0
turngate_rule_failures_total{hook="beforeToolCall",policy="fail-closed"} 1
turngate_rule_failures_total{hook="beforeTurn",policy="fail-closed"} 0
turngate_rule_failures_total{hook="onChatError",policy="fail-closed"} 0
turngate_rule_failures_total{hook="toolResult",policy="fail-closed"} 0
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "turngate_rule_failures_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.Decisions.WithLabelValues(policy.HookBeforeToolCall, policy.OutcomeError, "acme")); got != 1 {
		t.Errorf("decisions_total{outcome=error} = %v, want 1", got)
	}
}

// labelValues returns the sorted distinct values of label among the
// series of the metric family name.
func labelValues(t *testing.T, m *Metrics, name, label string) []string {
	t.Helper()
	families, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == label && !slices.Contains(out, l.GetValue()) {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
