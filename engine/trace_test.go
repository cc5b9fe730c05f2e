package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// signalHooks records the deadline and abort signal each hook saw.
type signalHooks struct {
	engine.NopHooks
	mu   sync.Mutex
	seen map[string]engine.Identity
}

func (h *signalHooks) saw(hook string, id engine.Identity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[hook] = id
}

func (h *signalHooks) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	h.saw("beforeTurn", tc.Identity)
	return &engine.TurnConfig{Timeout: &engine.TimeoutConfig{TotalMs: 60_000}}, nil
}

func (h *signalHooks) BeforeStep(_ context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	h.saw("beforeStep", sc.Identity)
	return nil, nil
}

func (h *signalHooks) OnChatResponse(_ context.Context, r *engine.ChatResponseResult) {
	h.saw("onChatResponse", r.Identity)
}

// TestHooksSeeDeadlineAndAbort checks the turn's deadline and abort
// signal in the hooks' identity: beforeTurn sees the caller's deadline,
// beforeStep the sooner one of the turn's timeout.totalMs; nothing is
// aborted until the caller cancels while a tool runs, and onChatResponse,
// after that, sees it.
func TestHooksSeeDeadlineAndAbort(t *testing.T) {
	eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default()}, Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	start := time.Now()
	h := &signalHooks{seen: map[string]engine.Identity{}}
	req := weatherTurn()
	req.Hooks = h
	req.Tools[0].Executor = engine.ExecutorFunc(func(ctx context.Context, _ engine.ToolExecution) (json.RawMessage, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if res := eng.Run(ctx, req); res.Status != engine.StatusAborted {
		t.Fatalf("status %s, want aborted", res.Status)
	}
	tests := []struct {
		hook     string
		deadline time.Duration // from the start, within a minute
		aborted  bool
	}{
		{"beforeTurn", time.Hour, false},
		{"beforeStep", time.Minute, false},
		{"onChatResponse", time.Minute, true},
	}
	for _, tt := range tests {
		id, ok := h.seen[tt.hook]
		switch {
		case !ok:
			t.Errorf("%s was not called", tt.hook)
		case id.Deadline.Before(start.Add(tt.deadline-time.Minute/2)) || id.Deadline.After(time.Now().Add(tt.deadline)):
			t.Errorf("%s: deadline %v, want about %v from the start", tt.hook, id.Deadline.Sub(start), tt.deadline)
		case id.Aborted != tt.aborted || id.RequestID != "bench":
			t.Errorf("%s: aborted %v, requestId %q; want %v and the turn's", tt.hook, id.Aborted, id.RequestID, tt.aborted)
		}
	}
}
