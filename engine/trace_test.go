package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

// TestTraceSpansAlwaysEnd checks the engine's span tree and that every
// span it starts ends, however the turn ends: completed, with a client
// tool call left pending, aborted while a tool runs.
func TestTraceSpansAlwaysEnd(t *testing.T) {
	tests := []struct {
		name   string
		hooks  engine.Hooks
		tool   func(cancel context.CancelFunc) engine.Executor
		status string
		want   []string // span names, in end order
		check  func(t *testing.T, spans []sdktrace.ReadOnlySpan)
	}{
		{name: "completed", status: engine.StatusCompleted,
			want: []string{"chat up-scripted", "execute_tool weather", "turngate.step", "chat up-scripted", "turngate.step", "invoke_agent a"}},
		{name: "client tool pending", status: engine.StatusCompleted, tool: func(context.CancelFunc) engine.Executor { return nil },
			want: []string{"chat up-scripted", "execute_tool weather", "turngate.step", "invoke_agent a"},
			check: func(t *testing.T, spans []sdktrace.ReadOnlySpan) {
				if !hasAttr(spans[1], "turngate.tool.pending", "true") || !hasAttr(spans[1], "turngate.tool.decision", "client") {
					t.Errorf("the pending client call's span: %v", spans[1].Attributes())
				}
			}},
		{name: "held for approval", status: engine.StatusCompleted, hooks: approveAll{},
			want: []string{"chat up-scripted", "execute_tool weather", "turngate.step", "invoke_agent a"},
			check: func(t *testing.T, spans []sdktrace.ReadOnlySpan) {
				if !hasAttr(spans[1], "turngate.tool.awaiting_approval", "true") || spans[1].Status().Code != codes.Unset {
					t.Errorf("the held call's span: %v %v", spans[1].Attributes(), spans[1].Status())
				}
			}},
		{name: "aborted while the tool runs", status: engine.StatusAborted,
			tool: func(cancel context.CancelFunc) engine.Executor {
				return engine.ExecutorFunc(func(ctx context.Context, _ engine.ToolExecution) (json.RawMessage, error) {
					cancel()
					<-ctx.Done()
					return nil, ctx.Err()
				})
			},
			want: []string{"chat up-scripted", "execute_tool weather", "turngate.step", "invoke_agent a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default()}, Logger: quiet, Tracer: tp.Tracer("test")})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := weatherTurn()
			req.Model = "scripted"
			if tc.tool != nil {
				req.Tools[0].Executor = tc.tool(cancel)
			}
			if tc.hooks != nil {
				req.Hooks = tc.hooks
			}
			if res := eng.Run(ctx, req); res.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", res.Status, res.Error, tc.status)
			}
			ended := rec.Ended()
			if len(rec.Started()) != len(ended) {
				t.Fatalf("%d spans started, %d ended", len(rec.Started()), len(ended))
			}
			var names []string
			for _, s := range ended {
				names = append(names, s.Name())
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("spans %q, want %q", names, tc.want)
			}
			turn := ended[len(ended)-1]
			for _, s := range ended[:len(ended)-1] {
				if s.SpanContext().TraceID() != turn.SpanContext().TraceID() {
					t.Errorf("span %s is not in the turn's trace", s.Name())
				}
			}
			if !hasAttr(turn, "turngate.turn.status", tc.status) {
				t.Errorf("turn span attributes %v, want status %s", turn.Attributes(), tc.status)
			}
			if tc.check != nil {
				tc.check(t, ended)
			}
		})
	}
}

// approveAll holds every tool call for a person's approval.
type approveAll struct{ engine.NopHooks }

func (approveAll) BeforeToolCall(context.Context, *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	return &engine.ToolCallDecision{Action: engine.ActionApproval, Approvals: []engine.ApprovalReason{{Reason: "check first"}}}, nil
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit() == value
		}
	}
	return false
}

// TestTraceRecordsContent checks the per-turn telemetry settings a
// beforeTurn hook returns: without them no span holds message content;
// recordInputs puts the model calls' system prompt and messages and the
// tool call's input on their spans, recordOutputs the model's output
// message and the tool's result.
func TestTraceRecordsContent(t *testing.T) {
	inputs := []string{"gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.tool.call.arguments"}
	outputs := []string{"gen_ai.output.messages", "gen_ai.tool.call.result"}
	tests := []struct {
		name      string
		telemetry *engine.TelemetryConfig
		want      []string // the content attributes on some span
	}{
		{"none", nil, nil},
		{"off", &engine.TelemetryConfig{}, nil},
		{"inputs", &engine.TelemetryConfig{RecordInputs: true}, inputs},
		{"outputs", &engine.TelemetryConfig{RecordOutputs: true}, outputs},
		{"both", &engine.TelemetryConfig{RecordInputs: true, RecordOutputs: true}, append(slices.Clone(inputs), outputs...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default()}, Logger: quiet, Tracer: tp.Tracer("test")})
			req := weatherTurn()
			req.System = "Be brief."
			req.Hooks = telemetryHook{cfg: tc.telemetry}
			if res := eng.Run(context.Background(), req); res.Status != engine.StatusCompleted {
				t.Fatalf("status %s (%s)", res.Status, res.Error)
			}
			got := map[string]string{}
			for _, s := range rec.Ended() {
				for _, kv := range s.Attributes() {
					if k := string(kv.Key); slices.Contains(inputs, k) || slices.Contains(outputs, k) {
						got[k] += kv.Value.Emit()
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("content attributes %v, want %v", got, tc.want)
			}
			for _, k := range tc.want {
				if got[k] == "" {
					t.Errorf("no %s on any span (got %v)", k, got)
				}
			}
			for k, want := range map[string]string{"gen_ai.system_instructions": "Be brief.", "gen_ai.tool.call.arguments": `"city"`,
				"gen_ai.input.messages": "What is the weather in Paris?", "gen_ai.tool.call.result": `{"weather":"sunny"}`,
				"gen_ai.output.messages": `"type":"tool-call"`} {
				if v, ok := got[k]; ok && !strings.Contains(v, want) {
					t.Errorf("%s = %s, want it to hold %s", k, v, want)
				}
			}
		})
	}
}

// telemetryHook returns cfg as beforeTurn's telemetry settings.
type telemetryHook struct {
	engine.NopHooks
	cfg *engine.TelemetryConfig
}

func (h telemetryHook) BeforeTurn(context.Context, *engine.TurnContext) (*engine.TurnConfig, error) {
	return &engine.TurnConfig{Telemetry: h.cfg}, nil
}
