package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

// callState is one tool call of a step on its way from the model to a
// result.
type callState struct {
	call      ToolCall
	tool      *Tool
	part      int
	index     int // in the step's calls
	step      int
	decision  string
	effective json.RawMessage // input the tool runs with (or substitute attribution)
	output    json.RawMessage
	errText   string
	err       error // a tool or policy failure, for onChatError
	errStage  string
	success   bool
	invalid   bool // the model's call was invalid: tool-input-error
	run       bool
	executed  bool
	pending   bool
	approval  *PendingApproval // held for approval (approval.go)
	duration  time.Duration
	record    int        // index in turn.records
	span      trace.Span // the call's span, when traced (turnTrace.startTool)
}

// resolveTools runs the step's tool calls: policy in call order, then the
// allowed server calls concurrently, then results in call order. It
// returns false when the turn ended (abort or timeout) meanwhile.
func (t *turn) resolveTools(parent, ctx context.Context, step *StepResult, msgs []ModelMessage, active []string, st *stepState) bool {
	states := make([]callState, len(step.ToolCalls))
	defer t.tr.endTools(states)
	runs := 0
	for i := range states {
		cs := &states[i]
		cs.call, cs.part = step.ToolCalls[i], st.toolParts[step.ToolCalls[i].ToolCallID]
		cs.index, cs.step = i, step.StepNumber
		t.decide(ctx, cs, st.validJSON[i], step.StepNumber, msgs, active)
		t.announce(cs)
		if cs.run {
			runs++
		}
	}
	if runs > 0 && !t.execute(ctx, states, runs, step.StepNumber, msgs) {
		t.interrupted(parent, ctx, nil)
		return false
	}
	for i := range states {
		cs := &states[i]
		if cs.approval != nil {
			t.approvals = append(t.approvals, *cs.approval)
			continue
		}
		if cs.pending {
			t.pending = append(t.pending, ToolCall{ToolCallID: cs.call.ToolCallID, ToolName: cs.call.ToolName, Input: cs.effective, Dynamic: cs.call.Dynamic})
			continue
		}
		t.settle(ctx, cs, step, msgs)
	}
	return true
}

// decide validates one call and consults beforeToolCall.
func (t *turn) decide(ctx context.Context, cs *callState, validJSON bool, step int, msgs []ModelMessage, active []string) {
	name := cs.call.ToolName
	cs.decision = DecisionError
	if i, ok := t.toolIndex[name]; ok && slices.Contains(active, name) {
		cs.tool = &t.tools[i]
	}
	ctx = t.tr.startTool(ctx, cs)
	defer func() {
		t.records = append(t.records, ToolCallRecord{
			ToolCallID: cs.call.ToolCallID,
			ToolName:   name,
			Input:      cs.call.Input,
			StepNumber: step,
			Decision:   cs.decision,
			Success:    cs.decision != DecisionError,
		})
		cs.record = len(t.records) - 1
	}()
	if cs.tool == nil {
		cs.invalid, cs.errText = true, fmt.Sprintf("Model tried to call unavailable tool %q.", name)
		return
	}
	if !validJSON {
		cs.invalid, cs.errText = true, fmt.Sprintf("Invalid input for tool %q: the input is not valid JSON.", name)
		return
	}
	if err := t.e.schemas.validate(cs.tool.InputSchema, cs.call.Input); err != nil {
		cs.invalid, cs.errText = true, fmt.Sprintf("Invalid input for tool %q: %v", name, err)
		return
	}
	d, err := callBeforeToolCall(ctx, t.hooks, &ToolCallContext{
		Identity:      t.identity(),
		Type:          "tool-call",
		ToolCallID:    cs.call.ToolCallID,
		ToolName:      name,
		Input:         cs.call.Input,
		Dynamic:       cs.call.Dynamic,
		Tool:          cs.tool.ToolInfo,
		StepNumber:    step,
		Messages:      msgs,
		Body:          t.req.Body,
		PreviousCalls: slices.Clone(t.records),
		Attachments:   t.attachments(),
	})
	if err != nil {
		cs.policyError(fmt.Errorf("beforeToolCall: %w", err))
		return
	}
	switch {
	case d == nil || (d.Action == ActionAllow && len(d.Input) == 0):
		cs.decision, cs.effective = DecisionAllow, cs.call.Input
	case d.Action == ActionAllow:
		if err := t.e.schemas.validate(cs.tool.InputSchema, d.Input); err != nil {
			cs.policyError(fmt.Errorf("beforeToolCall rewrote the input of tool %q into an invalid input: %w", name, err))
			return
		}
		cs.decision, cs.effective = DecisionRewrite, d.Input
	case d.Action == ActionBlock:
		reason := d.Reason
		if reason == "" {
			reason = fmt.Sprintf("Tool %q was blocked by beforeToolCall.", name)
		}
		cs.decision, cs.success, cs.output = DecisionBlock, true, jsonString(reason)
		return
	case d.Action == ActionSubstitute:
		out := orNull(d.Output)
		if !json.Valid(out) || (len(d.Input) > 0 && !json.Valid(d.Input)) {
			cs.policyError(fmt.Errorf("beforeToolCall substituted tool %q with invalid JSON", name))
			return
		}
		cs.decision, cs.success, cs.output, cs.effective = DecisionSubstitute, true, out, d.Input
		return
	case d.Action == ActionApproval:
		t.hold(cs, d, step)
		return
	default:
		cs.policyError(fmt.Errorf("beforeToolCall returned unknown action %q", d.Action))
		return
	}
	if cs.tool.Executor == nil {
		cs.decision, cs.pending = DecisionClient, true
		return
	}
	cs.run = true
}

// policyErrorText is what the model and the client see when a tool call's
// policy fails (fail closed). The rule's internals (file positions, source,
// the values it handled) stay in the decision record and onChatError; they
// never reach the model, the stream or the transcript.
func policyErrorText(tool string) string {
	return fmt.Sprintf("Tool %q was refused: its policy could not be evaluated.", tool)
}

// toolErrorText is what the model and the client see when a tool fails:
// a transport error or a backend's error body names the gateway's
// network and the backend's internals (addresses, stack traces), so they
// stay in the afterToolCall record, the audit log, onChatError and the
// gateway's log. An engine-made publicError (a timeout, an output that is
// not JSON) shows its own text instead.
func toolErrorText(tool string) string {
	return fmt.Sprintf("Tool %q failed.", tool)
}

func (cs *callState) policyError(err error) {
	cs.decision, cs.err, cs.errStage = DecisionError, err, StagePolicy
}

// announce sends the call's input event. A client call that the server
// resolved (block, substitute, error) is marked providerExecuted so the AI
// SDK client does not run it; a pending client call carries the effective
// input the client must run with.
func (t *turn) announce(cs *callState) {
	part := &t.msg.Parts[cs.part]
	ev := Event{ToolCallID: cs.call.ToolCallID, ToolName: cs.call.ToolName, Dynamic: cs.call.Dynamic, Input: cs.call.Input}
	if cs.invalid {
		ev.Type, ev.ErrorText = EventToolInputError, cs.errText
		t.emit(ev)
		return
	}
	ev.Type = EventToolInputAvailable
	if cs.pending {
		ev.Input = cs.effective
	}
	ev.ProviderExecuted = cs.tool.Executor == nil && !cs.pending
	part.Input, part.State = ev.Input, ToolStateInputAvailable
	t.emit(ev)
	if cs.approval != nil {
		t.requestApproval(cs, part)
	}
}

// execute runs the calls marked run concurrently, at most
// the turn's ToolLimits.MaxConcurrent at a time. It returns false if ctx ended first; the
// running tools see their context cancelled.
func (t *turn) execute(ctx context.Context, states []callState, runs, step int, msgs []ModelMessage) bool {
	t.flush() // before any tool starts: they may take long
	sem := make(chan struct{}, t.limits.MaxConcurrent)
	done := make(chan struct{}, runs)
	for i := range states {
		if !states[i].run {
			continue
		}
		go func(cs *callState) {
			sem <- struct{}{}
			defer func() {
				<-sem
				done <- struct{}{}
			}()
			t.runTool(ctx, cs, step, msgs)
		}(&states[i])
	}
	for range runs {
		select {
		case <-done:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil // an abort while the last tool returned still wins
}

// runTool executes one call with its timeout, turning panics, errors and
// invalid outputs into tool errors and bounding the output size.
func (t *turn) runTool(ctx context.Context, cs *callState, step int, msgs []ModelMessage) {
	timeout := cs.tool.Timeout
	if timeout <= 0 {
		timeout = t.limits.Timeout
	}
	if t.replayJournaled(ctx, cs) {
		return
	}
	defer t.journal(ctx, cs)
	tctx, cancel := context.WithTimeout(t.tr.toolContext(ctx, cs), timeout)
	defer cancel()
	start := time.Now()
	out, err := safeExecute(tctx, cs.tool.Executor, ToolExecution{
		Identity:       t.identity(),
		ToolCallID:     cs.call.ToolCallID,
		ToolName:       cs.call.ToolName,
		Input:          cs.effective,
		StepNumber:     step,
		Messages:       msgs,
		IdempotencyKey: IdempotencyKey(t.req.Identity, cs.call.ToolCallID),
	})
	cs.duration, cs.executed = time.Since(start), true
	switch {
	case err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		err = &publicError{msg: fmt.Sprintf("tool %q timed out after %s", cs.call.ToolName, timeout), cause: err}
	case err == nil && len(out) == 0:
		out = nullJSON
	case err == nil && !json.Valid(out):
		err = publicErrorf("tool %q returned invalid JSON", cs.call.ToolName)
	}
	if err != nil {
		cs.err, cs.errStage = err, StageTool
		return
	}
	limit := cs.tool.MaxOutputBytes
	if limit <= 0 {
		limit = t.limits.MaxOutputBytes
	}
	cs.output, cs.success = truncateOutput(out, limit), true
}

func safeExecute(ctx context.Context, ex Executor, call ToolExecution) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("tool %q panicked: %v", call.ToolName, r)
		}
	}()
	return ex.Execute(ctx, call)
}

// truncateOutput bounds out to limit bytes. A longer output becomes a JSON
// string holding its first bytes (cut at a UTF-8 boundary) and a visible
// marker, so the model knows it saw a part only.
func truncateOutput(out json.RawMessage, limit int) json.RawMessage {
	if len(out) <= limit {
		return out
	}
	// A JSON string output is cut as text, so the model does not see it
	// quoted twice; anything else is cut as its JSON text.
	text := string(out)
	if out[0] == '"' {
		var s string
		if json.Unmarshal(out, &s) == nil {
			text = s
		}
	}
	if len(text) <= limit {
		return jsonString(text)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return jsonString(text[:cut] + "…[truncated " + strconv.Itoa(len(text)-cut) + " bytes]")
}

// settle applies the tool-result hook, reports the outcome (event, message
// part, afterToolCall) and records it in the step, in call order.
func (t *turn) settle(ctx context.Context, cs *callState, step *StepResult, msgs []ModelMessage) {
	ctx = t.tr.toolContext(ctx, cs)
	defer t.tr.endTool(cs)
	rc := &ToolCallResultContext{
		Identity:       t.identity(),
		Type:           "tool-call",
		ToolCallID:     cs.call.ToolCallID,
		ToolName:       cs.call.ToolName,
		Input:          cs.call.Input,
		EffectiveInput: cs.effective,
		Dynamic:        cs.call.Dynamic,
		StepNumber:     step.StepNumber,
		Messages:       msgs,
		Decision:       cs.decision,
		Executed:       cs.executed,
	}
	if cs.tool != nil {
		rc.Tool = cs.tool.ToolInfo
	}
	if cs.executed && cs.success {
		rc.Success, rc.Output = true, cs.output
		out, err := t.runToolResult(ctx, rc)
		if err != nil {
			cs.success, cs.output, cs.err, cs.errStage = false, nil, err, StagePolicy
		}
		rc.ModelOutput = out
	}
	if cs.err != nil {
		cs.success = false
		def := toolErrorText(cs.call.ToolName)
		if cs.errStage == StagePolicy {
			def = policyErrorText(cs.call.ToolName)
		} else {
			t.log.Warn("engine: tool call failed", "requestId", t.req.RequestID, "tool", cs.call.ToolName,
				"toolCallId", cs.call.ToolCallID, "err", cs.err)
		}
		cs.errText = t.chatError(ctx, cs.errStage, ClassifyError(cs.errStage, cs.err), cs.err, def)
	}
	rc.Success, rc.DurationMs = cs.success, float64(cs.duration.Microseconds())/1000
	part := &t.msg.Parts[cs.part]
	ev := Event{ToolCallID: cs.call.ToolCallID, Dynamic: cs.call.Dynamic, ProviderExecuted: cs.tool != nil && cs.tool.Executor == nil}
	if cs.success {
		// afterToolCall keeps the tool's own output for audit; the model
		// (event, message part, step) sees the toolResult replacement.
		seen := cs.output
		if rc.ModelOutput != nil {
			seen = rc.ModelOutput
		}
		rc.Output, rc.Error = cs.output, ""
		ev.Type, ev.Output = EventToolOutputAvailable, seen
		part.State, part.Output = ToolStateOutputAvailable, seen
	} else {
		// afterToolCall (server-side audit) gets the raw error; the model,
		// stream and transcript get errText.
		rc.Output, rc.Error = nil, cs.errText
		if cs.err != nil {
			rc.Error = cs.err.Error()
		}
		ev.Type, ev.ErrorText = EventToolOutputError, cs.errText
		part.State, part.ErrorText = ToolStateOutputError, cs.errText
	}
	t.records[cs.record].Success = cs.success
	t.emit(ev)
	t.callAfterToolCall(ctx, rc)
	step.ToolResults = append(step.ToolResults, ToolResult{
		ToolCallID: cs.call.ToolCallID,
		ToolName:   cs.call.ToolName,
		Input:      cs.call.Input,
		Output:     part.Output,
		IsError:    !cs.success,
		ErrorText:  part.ErrorText,
		Decision:   cs.decision,
	})
}

// settleClientResults runs the toolResult hook and afterToolCall for the
// client tool outputs of msg that TurnRequest.ClientToolResults names (the
// continued message's, or a stateless history's last assistant message's),
// so client-supplied outputs pass the same data-loss policy and audit as
// server executions. A replaced output is written into msg, and re-emitted
// when msg is the turn's own (a stateless history's message is not in the
// stream); a hook error turns the output into a tool error (fail closed).
func (t *turn) settleClientResults(ctx context.Context, msg *UIMessage) {
	emit := func(ev Event) {
		if msg == &t.msg {
			t.emit(ev)
		}
	}
	for i, step := range toolParts(msg.Parts) {
		part := &msg.Parts[i]
		if !slices.Contains(t.req.ClientToolResults, part.ToolCallID) {
			continue
		}
		name := part.ToolPartName()
		rc := &ToolCallResultContext{
			Identity:   t.identity(),
			Type:       "tool-call",
			ToolCallID: part.ToolCallID,
			ToolName:   name,
			Input:      part.Input,
			Dynamic:    part.Type == PartDynamicTool,
			StepNumber: step,
			Decision:   DecisionClient,
			Executed:   true,
		}
		if i, ok := t.toolIndex[name]; ok {
			rc.Tool = t.tools[i].ToolInfo
		}
		switch part.State {
		case ToolStateOutputAvailable:
			rc.Success, rc.Output = true, orNull(part.Output)
			out, err := t.runToolResult(ctx, rc)
			switch {
			case err != nil:
				rc.Success, rc.Error = false, t.chatError(ctx, StagePolicy, ClassifyError(StagePolicy, err), err, policyErrorText(name))
				part.State, part.Output, part.ErrorText = ToolStateOutputError, nil, rc.Error
				emit(Event{Type: EventToolOutputError, ToolCallID: part.ToolCallID, ErrorText: rc.Error, Dynamic: rc.Dynamic})
			case out != nil:
				rc.ModelOutput = out
				part.Output = rc.ModelOutput
				emit(Event{Type: EventToolOutputAvailable, ToolCallID: part.ToolCallID, Output: rc.ModelOutput, Dynamic: rc.Dynamic})
			}
		case ToolStateOutputError:
			rc.Error = part.ErrorText
		default:
			continue
		}
		t.callAfterToolCall(ctx, rc)
	}
}

// settleHistoryResults settles the client outputs of the last assistant
// message of a history the client sent whole (a turn that is not a
// continuation: the stateless endpoints) and returns the history with
// that message as the hooks left it; req.Messages is not changed.
func (t *turn) settleHistoryResults(ctx context.Context, history []UIMessage) []UIMessage {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role != RoleAssistant {
			continue
		}
		history = slices.Clone(history)
		msg := history[i]
		msg.Parts = slices.Clone(msg.Parts)
		t.settleClientResults(ctx, &msg)
		history[i] = msg
		break
	}
	return history
}

// runToolResult runs toolResult over rc's output. It returns the output the
// model sees instead (nil when unchanged), or the error to fail closed on: a
// hook error or panic, or a replacement that is not JSON.
func (t *turn) runToolResult(ctx context.Context, rc *ToolCallResultContext) (json.RawMessage, error) {
	d, err := callToolResult(ctx, t.hooks, rc)
	switch {
	case err != nil:
		return nil, fmt.Errorf("toolResult: %w", err)
	case d == nil:
		return nil, nil
	}
	out := orNull(d.Output)
	if !json.Valid(out) {
		return nil, fmt.Errorf("toolResult replaced the output of tool %q with invalid JSON", rc.ToolName)
	}
	return out, nil
}
