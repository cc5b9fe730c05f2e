package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
}
