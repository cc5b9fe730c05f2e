package engine

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes of turngate's own (the GenAI semantic conventions have
// no key for them).
const (
	attrRequestID   = attribute.Key("turngate.request.id")
	attrTenant      = attribute.Key("turngate.tenant")
	attrEntryPath   = attribute.Key("turngate.entry_path")
	attrDepth       = attribute.Key("turngate.depth")
	attrStatus      = attribute.Key("turngate.turn.status")
	attrSteps       = attribute.Key("turngate.turn.steps")
	attrStepNumber  = attribute.Key("turngate.step.number")
	attrModelAlias  = attribute.Key("turngate.model")
	attrDecision    = attribute.Key("turngate.tool.decision")
	attrToolKind    = attribute.Key("turngate.tool.kind")
	attrToolServer  = attribute.Key("turngate.tool.server")
	attrFinish      = attribute.Key("turngate.finish_reason")
	attrErrorStage  = attribute.Key("turngate.error.stage")
	attrToolPending = attribute.Key("turngate.tool.pending")
	// attrToolApproval marks a call held until a person approves it.
	attrToolApproval = attribute.Key("turngate.tool.awaiting_approval")
)

// turnTrace holds the open spans of a traced turn: the turn (GenAI
// invoke_agent), its current step, and the step's model call (GenAI chat).
// Tool calls keep their execute_tool span in their callState, as several
// run at once. A turn of an Engine without Options.Tracer has no turnTrace
// (nil) and every method below is then one nil check: tracing that is off
// costs no allocation.
//
// Message content (prompts, outputs, tool inputs and results) is put on a
// span only as the turn's TelemetryConfig asks.
type turnTrace struct {
	tracer trace.Tracer
	turn   trace.Span
	step   trace.Span
	model  trace.Span
	// content says which message content the spans record.
	content TelemetryConfig
}

// record sets what the spans record of message content (nil: none).
func (tt *turnTrace) record(c *TelemetryConfig) {
	if tt != nil && c != nil {
		tt.content = *c
	}
}

// contentJSON renders message content for a span attribute; "" when it
// does not encode (content the engine built always does).
func contentJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// startTrace opens the turn's span under ctx's (an incoming request's
// trace context, or a tool call's span for a sub-agent) and returns the
// context the turn runs in.
func (t *turn) startTrace(ctx context.Context) context.Context {
	tracer := t.e.opts.Tracer
	if tracer == nil {
		return ctx
	}
	id := &t.req.Identity
	t.tr = &turnTrace{tracer: tracer}
	ctx, t.tr.turn = tracer.Start(ctx, semconv.GenAIOperationNameInvokeAgent.Value.AsString()+" "+id.Agent,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentName(id.Agent),
			semconv.GenAIConversationID(id.SessionID),
			attrRequestID.String(id.RequestID),
			attrTenant.String(id.Principal.Tenant),
			attrEntryPath.String(id.EntryPath),
			attrDepth.Int(id.Depth),
		))
	return ctx
}

// endTurn closes the turn's spans with its outcome.
func (tt *turnTrace) endTurn(t *turn, res *TurnResult) {
	if tt == nil {
		return
	}
	tt.endStep()
	tt.turn.SetAttributes(
		semconv.GenAIRequestModel(t.model),
		attrStatus.String(res.Status),
		attrFinish.String(res.FinishReason),
		attrSteps.Int(len(res.Steps)),
		semconv.GenAIUsageInputTokens(res.Usage.InputTokens),
		semconv.GenAIUsageOutputTokens(res.Usage.OutputTokens),
	)
	if res.Status == StatusError {
		tt.turn.SetStatus(codes.Error, res.Error)
	}
	tt.turn.End()
}

// fail records the error that ends the turn on its span (stage and the
// server-side error text, as logged).
func (tt *turnTrace) fail(stage string, err error) {
	if tt == nil {
		return
	}
	tt.turn.SetAttributes(attrErrorStage.String(stage))
	tt.turn.RecordError(err)
}

// output is the step's assistant message as the model produced it: its
// text and tool calls (its reasoning, which sendReasoning may hide from
// the client, is left out).
func (st *stepState) output() ModelMessage {
	m := ModelMessage{Role: RoleAssistant}
	if len(st.text) > 0 {
		m.Content = append(m.Content, ContentPart{Type: ContentText, Text: string(st.text)})
	}
	for _, c := range st.calls {
		m.Content = append(m.Content, ContentPart{Type: ContentToolCall, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: c.Input})
	}
	return m
}

// startStep closes the previous step's span and opens step n's under the
// turn's; beforeStep's decision is recorded on it.
func (tt *turnTrace) startStep(ctx context.Context, n int) context.Context {
	if tt == nil {
		return ctx
	}
	tt.endStep()
	ctx, tt.step = tt.tracer.Start(ctx, "turngate.step", trace.WithAttributes(attrStepNumber.Int(n)))
	return ctx
}

// finishStep records a finished step's outcome on its span.
func (tt *turnTrace) finishStep(s *StepResult) {
	if tt == nil || tt.step == nil {
		return
	}
	tt.step.SetAttributes(attrFinish.String(s.FinishReason),
		semconv.GenAIUsageInputTokens(s.Usage.InputTokens),
		semconv.GenAIUsageOutputTokens(s.Usage.OutputTokens))
	tt.endStep()
}

func (tt *turnTrace) endStep() {
	if tt.step != nil {
		tt.step.End()
		tt.step = nil
	}
}

// startModel opens the span of a step's model call (GenAI chat, a client
// span: the provider's HTTP request carries its trace context). The
// provider adds gen_ai.provider.name (tracing.SetProvider).
func (tt *turnTrace) startModel(ctx context.Context, req *ModelRequest, alias string) context.Context {
	if tt == nil {
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(req.Model), attrModelAlias.String(alias))
	if req.MaxOutputTokens != nil {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(*req.MaxOutputTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if req.TopP != nil {
		attrs = append(attrs, semconv.GenAIRequestTopP(*req.TopP))
	}
	if req.Seed != nil {
		attrs = append(attrs, semconv.GenAIRequestSeed(int(*req.Seed)))
	}
	if tt.content.RecordInputs {
		attrs = append(attrs, semconv.GenAISystemInstructionsKey.String(req.System),
			semconv.GenAIInputMessagesKey.String(contentJSON(req.Messages)))
	}
	ctx, tt.model = tt.tracer.Start(ctx, semconv.GenAIOperationNameChat.Value.AsString()+" "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// endModel closes the model call's span: with the finish part's usage and
// finish reason when the stream ended well (finish not nil), and the
// step's output message (st) when the turn records outputs; else with err.
func (tt *turnTrace) endModel(finish *StreamPart, err error, st *stepState) {
	if tt == nil || tt.model == nil {
		return
	}
	span := tt.model
	tt.model = nil
	if finish == nil {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return
	}
	reason := finish.RawFinishReason
	if reason == "" {
		reason = finish.FinishReason
	}
	if reason != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(reason))
	}
	if tt.content.RecordOutputs && st != nil {
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(contentJSON([]ModelMessage{st.output()})))
	}
	if u := finish.Usage; u != nil {
		span.SetAttributes(semconv.GenAIUsageInputTokens(u.InputTokens), semconv.GenAIUsageOutputTokens(u.OutputTokens))
		if u.CachedInputTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(u.CachedInputTokens))
		}
		if u.ReasoningTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageReasoningOutputTokens(u.ReasoningTokens))
		}
	}
	span.End()
}

// startTool opens the span of one tool call (GenAI execute_tool) under the
// step's, before its beforeToolCall decision, and returns the context of
// the call's hooks and execution.
func (tt *turnTrace) startTool(ctx context.Context, cs *callState) context.Context {
	if tt == nil {
		return ctx
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(cs.call.ToolName),
		semconv.GenAIToolCallID(cs.call.ToolCallID),
	}
	if cs.tool != nil {
		attrs = append(attrs, attrToolKind.String(cs.tool.Kind))
		if cs.tool.Server != "" {
			attrs = append(attrs, attrToolServer.String(cs.tool.Server))
		}
	}
	if tt.content.RecordInputs {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(string(cs.call.Input)))
	}
	ctx, cs.span = tt.tracer.Start(ctx, semconv.GenAIOperationNameExecuteTool.Value.AsString()+" "+cs.call.ToolName,
		trace.WithAttributes(attrs...))
	return ctx
}

// toolContext returns ctx carrying the call's span, for its execution
// (which runs on the step's context in its own goroutine).
func (tt *turnTrace) toolContext(ctx context.Context, cs *callState) context.Context {
	if tt == nil || cs.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, cs.span)
}

// endTool closes a settled tool call's span with its decision and
// outcome (settle runs once every tool of the step has returned).
func (tt *turnTrace) endTool(cs *callState) {
	if tt == nil || cs.span == nil {
		return
	}
	span := cs.span
	cs.span = nil
	span.SetAttributes(attrDecision.String(cs.decision))
	if tt.content.RecordOutputs && len(cs.output) > 0 {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(string(cs.output)))
	}
	switch {
	case cs.pending:
		span.SetAttributes(attrToolPending.Bool(true))
	case cs.err != nil:
		span.SetAttributes(attrErrorStage.String(cs.errStage))
		span.RecordError(cs.err)
		span.SetStatus(codes.Error, cs.err.Error())
	case cs.invalid:
		span.SetStatus(codes.Error, cs.errText)
	}
	span.End()
}

// endTools closes the spans of the calls that were never settled: client
// calls awaiting their result, calls held for approval, and the calls of a step that was aborted or
// timed out, whose tools may still be running. It reads only what decide
// set, never what a running tool writes.
func (tt *turnTrace) endTools(states []callState) {
	if tt == nil {
		return
	}
	for i := range states {
		cs := &states[i]
		if cs.span == nil {
			continue // settled: endTool closed it
		}
		cs.span.SetAttributes(attrDecision.String(cs.decision))
		switch {
		case cs.pending:
			cs.span.SetAttributes(attrToolPending.Bool(true))
		case cs.approval != nil:
			cs.span.SetAttributes(attrToolApproval.Bool(true))
		default:
			cs.span.SetStatus(codes.Error, "the turn ended before the call was settled")
		}
		cs.span.End()
	}
}
