package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/policy"
)

// genAISystem is the deprecated predecessor of gen_ai.provider.name, still
// read by some tracing backends.
const genAISystem = attribute.Key("gen_ai.system")

// SetProvider names the model provider (gen_ai.provider.name: "openai",
// "anthropic"…) on the model call span in ctx. Providers call it when a
// stream starts; it does nothing when the span is not recorded.
func SetProvider(ctx context.Context, name string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.GenAIProviderNameKey.String(name), genAISystem.String(name))
}

// DecisionEvent is the name of the span event of one policy decision.
const DecisionEvent = "turngate.policy.decision"

// Attributes of a DecisionEvent.
const (
	AttrHook       = attribute.Key("turngate.policy.hook")
	AttrRevision   = attribute.Key("turngate.policy.revision")
	AttrOutcome    = attribute.Key("turngate.policy.outcome")
	AttrRulesFired = attribute.Key("turngate.policy.rules_fired")
	AttrError      = attribute.Key("turngate.policy.error")
	AttrDurationUs = attribute.Key("turngate.policy.duration_us")
	AttrShadow     = attribute.Key("turngate.policy.shadow_changed")
)

// Decision records a hook's policy decision as a DecisionEvent on the
// span in ctx (the turn's for beforeTurn, the step's for beforeStep, the
// tool call's for beforeToolCall and toolResult): the rule revision, the
// outcome, the rules fired and the error, if any. The decision's input and
// overrides stay in the audit record. It does nothing when the span is not
// recorded.
func Decision(ctx context.Context, r *policy.Record) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, AttrHook.String(r.Hook), AttrRevision.String(r.Revision), AttrOutcome.String(r.Outcome),
		AttrDurationUs.Int64(r.DurationMicros))
	if len(r.RulesFired) > 0 {
		attrs = append(attrs, AttrRulesFired.StringSlice(r.RulesFired))
	}
	if r.Error != "" {
		attrs = append(attrs, AttrError.String(r.Error))
	}
	if r.Shadow != nil {
		attrs = append(attrs, AttrShadow.Bool(r.Shadow.Changed))
	}
	span.AddEvent(DecisionEvent, trace.WithAttributes(attrs...))
}
