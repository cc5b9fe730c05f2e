package audit

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// BenchmarkRecord measures writing one decision record (a beforeToolCall
// that rewrote the input), without and with redaction.
func BenchmarkRecord(b *testing.B) {
	step := 1
	rec := &policy.Record{Time: time.Now(), Hook: policy.HookBeforeToolCall, Revision: "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
		RequestID: "req_1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", SessionID: "chat_Xk3L9aP0qR7sT2uV", Agent: "demo", Tenant: "acme",
		StepNumber: &step, ToolCallID: "call_1_0", ToolName: "search", Outcome: policy.OutcomeMatched,
		RulesFired:     []string{"data.turngate.tool_call.patch"},
		Decision:       &engine.ToolCallDecision{Action: engine.ActionAllow, Input: []byte(`{"query":"turngate","limit":50}`)},
		DurationMicros: 41}
	for _, bc := range []struct {
		name   string
		redact []string
	}{{"plain", nil}, {"redacted", []string{"decision.input.query"}}} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(io.Discard, bc.redact, slog.New(slog.DiscardHandler))
			b.ReportAllocs()
			for b.Loop() {
				l.Record(rec)
			}
		})
	}
}
