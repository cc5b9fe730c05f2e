package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// continuePrompt is Think's ephemeral user message for a request that would
// otherwise end with an assistant message (think-implementation.md §2.2).
// It reaches the model but is never persisted.
const continuePrompt = "Continue your previous response from exactly where it left off. Do not repeat any of it."

// maskedErrorText is the client-visible error text unless onChatError
// replaces it: the AI SDK's default (protocols.md A.6).
const maskedErrorText = "An error occurred."

// maxRetryAfter is the longest Retry-After the engine waits for; a server
// asking for more is treated as a final failure rather than stalling a turn.
const maxRetryAfter = time.Minute

var (
	errChunkTimeout = errors.New("chunk timeout")
	errTotalTimeout = errors.New("total timeout")
)

// ErrModelTimeout is wrapped by the error of a turn whose model stream
// exceeded timeout.totalMs or stalled past timeout.chunkMs, so callers can
// tell a timeout from other failures (the OpenAI endpoint answers 504).
var ErrModelTimeout = errors.New("model timeout")

// publicError is an engine error whose text is safe to show clients
// (timeouts, structured-output failures); other errors are masked. cause,
// when set, is what it wraps.
type publicError struct {
	msg   string
	cause error
}

func (e *publicError) Error() string { return e.msg }

func (e *publicError) Unwrap() error { return e.cause }

func publicErrorf(format string, args ...any) error {
	return &publicError{msg: fmt.Sprintf(format, args...)}
}

// PublicError returns an error whose text msg is written for clients and
// the model: it names no backend internals. A tool whose error is or wraps
// one shows msg as its tool error; any other tool error shows a generic
// text (the detail goes to afterToolCall, onChatError and the log). Its
// Error is msg; cause, when set, is what it wraps (errors.Is and As).
func PublicError(msg string, cause error) error {
	return &publicError{msg: msg, cause: cause}
}

// PublicText returns the text of the PublicError err is or wraps (the
// outermost), and whether there is one.
func PublicText(err error) (string, bool) {
	var pe *publicError
	if errors.As(err, &pe) {
		return pe.msg, true
	}
	return "", false
}

// turn is the state of one Run.
type turn struct {
	e     *Engine
	req   *TurnRequest
	hooks Hooks
	// live is the context the turn runs under: its deadline and abort
	// signal, as hooks see them (identity).
	live  context.Context
	log   *slog.Logger
	emitF func(Event)
	begin time.Time
	// limits are the request's ToolLimits, the Engine's options filling
	// the zero fields.
	limits ToolLimits

	// Configuration after beforeTurn.
	cfg           TurnConfig
	model         string
	system        string
	messages      []ModelMessage
	tools         []Tool
	toolIndex     map[string]int
	active        []string
	activeInfos   []ToolInfo
	maxSteps      int
	maxRetries    int
	timeout       TimeoutConfig
	sendReasoning bool
	turnCtx       *TurnContext
	provider      Provider
	upstream      string
	stream        guardedStream // the open model stream (startStream)
	compactedOnce bool          // reactive compaction ran (compactAfterOverflow)
	tr            *turnTrace    // the turn's spans; nil when not traced

	// Progress.
	msg     UIMessage
	steps   []StepResult
	records []ToolCallRecord
	pending []ToolCall
	// approvals are the calls held for approval (approval.go).
	approvals []PendingApproval
	stepOpen  bool
	blocks    []*textBlock
	free      []*textBlock
	chunk     ChunkContext

	// Outcome.
	status       string
	errText      string
	errClass     string
	finishReason string
	output       json.RawMessage
}

// textBlock is an open text or reasoning part of the current step.
type textBlock struct {
	id        string
	reasoning bool
	part      int // index in msg.Parts, -1 when reasoning is not sent
	buf       []byte
}

func newTurn(e *Engine, req *TurnRequest) *turn {
	t := &turn{e: e, req: req, hooks: req.Hooks, log: e.opts.Logger, emitF: req.Emit, begin: time.Now()}
	if t.hooks == nil {
		t.hooks = NopHooks{}
	}
	t.chunk.Identity = req.Identity
	t.limits = ToolLimits{
		Timeout:        cmp.Or(req.ToolLimits.Timeout, e.opts.ToolTimeout),
		MaxOutputBytes: cmp.Or(req.ToolLimits.MaxOutputBytes, e.opts.MaxOutputBytes),
		MaxConcurrent:  cmp.Or(req.ToolLimits.MaxConcurrent, e.opts.MaxConcurrentTools),
	}
	if n := len(req.Messages); req.Continuation && n > 0 && req.Messages[n-1].Role == RoleAssistant {
		last := req.Messages[n-1]
		t.msg = UIMessage{ID: last.ID, Role: RoleAssistant, Metadata: last.Metadata, Parts: slices.Clone(last.Parts)}
	} else {
		id := req.MessageID
		if id == "" {
			id = "msg_" + uuid.NewString()
		}
		t.msg = UIMessage{ID: id, Role: RoleAssistant}
	}
	return t
}

// identity is the turn's identity as a hook called now sees it: with the
// turn's deadline and whether it was aborted.
func (t *turn) identity() Identity {
	id := t.req.Identity
	if t.live != nil {
		id.Deadline, _ = t.live.Deadline()
		id.Aborted = t.live.Err() != nil
	}
	return id
}

func (t *turn) emit(ev Event) {
	if t.emitF != nil {
		t.emitF(ev)
	}
}

// flush tells the caller that the turn is about to wait (TurnRequest.Flush).
func (t *turn) flush() {
	if t.req.Flush != nil {
		t.req.Flush()
	}
}

func (t *turn) emitStart() {
	t.emit(Event{Type: EventStart, MessageID: t.msg.ID})
}

// setup assembles the turn context, runs beforeTurn and applies its config
// on top of the agent's defaults.
func (t *turn) setup(ctx context.Context) error {
	req := t.req
	t.addTools(req.Tools)
	t.addTools(req.Defaults.Tools)
	maxSteps := DefaultMaxSteps
	if req.Defaults.MaxSteps != nil {
		maxSteps = *req.Defaults.MaxSteps
	}
	history := req.Messages
	switch n := len(history); {
	case len(req.ClientToolResults)+len(req.ApprovalResponses) > 0 && req.Continuation && n > 0 && history[n-1].ID == t.msg.ID:
		t.settleClientResults(ctx, &t.msg)
		t.settleApprovals(ctx, history[:n-1])
		history = append(slices.Clip(history[:n-1]), t.msg)
	case len(req.ClientToolResults) > 0 && !req.Continuation:
		history = t.settleHistoryResults(ctx, history)
	}
	tc := &TurnContext{
		Identity:     t.identity(),
		System:       req.System,
		Messages:     ConvertToModelMessages(history),
		Tools:        t.toolInfos(nil),
		Model:        req.Model,
		Continuation: req.Continuation,
		Body:         req.Body,
		MaxSteps:     maxSteps,
		Attachments:  Attachments(history),
	}
	if s := req.Session; s != nil {
		tc.Context, tc.Summary, tc.Compacted = s.Context, s.Summary, s.Summary != ""
	}
	override, err := callBeforeTurn(ctx, t.hooks, tc)
	if err != nil {
		return fmt.Errorf("beforeTurn: %w", err)
	}
	t.cfg = req.Defaults
	t.cfg.Tools = nil
	t.cfg.StopWhen = slices.Clip(t.cfg.StopWhen)
	if override != nil {
		mergeTurnConfig(&t.cfg, override)
		t.addTools(override.Tools)
	}
	if t.cfg.Refuse != nil {
		return refusal(*t.cfg.Refuse)
	}
	cfg := &t.cfg
	t.model, t.system, t.messages = req.Model, req.System, tc.Messages
	if cfg.Model != nil {
		t.model = *cfg.Model
	}
	if cfg.System != nil {
		t.system = *cfg.System
	}
	if cfg.Messages != nil {
		t.messages = *cfg.Messages
	}
	t.messages = slices.Clip(t.messages)
	if n := len(t.messages); n > 0 && t.messages[n-1].Role == RoleAssistant {
		t.messages = append(t.messages, ModelMessage{Role: RoleUser, Content: []ContentPart{{Type: ContentText, Text: continuePrompt}}})
	}
	t.maxSteps = maxSteps
	if cfg.MaxSteps != nil {
		t.maxSteps = *cfg.MaxSteps
	}
	if t.maxSteps < 1 {
		return fmt.Errorf("maxSteps must be at least 1, got %d", t.maxSteps)
	}
	t.maxRetries = t.e.opts.DefaultMaxRetries
	if cfg.MaxRetries != nil {
		t.maxRetries = max(*cfg.MaxRetries, 0)
	}
	if cfg.Timeout != nil {
		t.timeout = *cfg.Timeout
		if t.timeout.TotalMs < 0 || t.timeout.ChunkMs < 0 {
			return fmt.Errorf("timeout must not be negative (totalMs %d, chunkMs %d)", t.timeout.TotalMs, t.timeout.ChunkMs)
		}
	}
	t.sendReasoning = cfg.SendReasoning == nil || *cfg.SendReasoning
	t.tr.record(cfg.Telemetry)
	if cfg.Output != nil {
		if _, err := t.e.schemas.compile(cfg.Output.Schema); err != nil {
			return fmt.Errorf("output schema: %w", err)
		}
	}
	if cfg.ActiveTools != nil {
		t.active = *cfg.ActiveTools
	} else {
		t.active = make([]string, len(t.tools))
		for i := range t.tools {
			t.active[i] = t.tools[i].Name
		}
	}
	t.activeInfos = t.toolInfos(t.active)
	if t.e.opts.Models == nil {
		return errors.New("engine has no model resolver (Options.Models)")
	}
	t.provider, t.upstream, err = t.resolve(t.model)
	if err != nil {
		return err
	}
	final := *tc
	final.System, final.Messages, final.Model, final.MaxSteps = t.system, t.messages, t.model, t.maxSteps
	final.Tools = t.toolInfos(nil)
	t.turnCtx = &final
	return nil
}

// addTools adds tools to the turn's set; a tool replaces an earlier one of
// the same name in place.
func (t *turn) addTools(tools []Tool) {
	if t.toolIndex == nil {
		t.toolIndex = make(map[string]int, len(tools))
	}
	for _, tool := range tools {
		if i, ok := t.toolIndex[tool.Name]; ok {
			t.tools[i] = tool
			continue
		}
		t.toolIndex[tool.Name] = len(t.tools)
		t.tools = append(t.tools, tool)
	}
}

// toolInfos describes the named tools (all tools when names is nil), in
// the turn's tool order, skipping names the turn does not have.
func (t *turn) toolInfos(names []string) []ToolInfo {
	infos := make([]ToolInfo, 0, len(t.tools))
	for i := range t.tools {
		if names == nil || slices.Contains(names, t.tools[i].Name) {
			infos = append(infos, t.tools[i].ToolInfo)
		}
	}
	return infos
}

// loop runs model steps until the turn ends. parent is Run's context (its
// cancellation is an abort); ctx adds the total timeout.
func (t *turn) loop(parent, ctx context.Context) {
	for n := 0; ; n++ {
		if t.interrupted(parent, ctx, nil) {
			return
		}
		ctx := t.tr.startStep(ctx, n) // the step's span, when traced
		plan, stage, err := t.prepareStep(ctx, n)
		if err != nil {
			t.fail(ctx, stage, err)
			return
		}
		step, ok := t.runStep(parent, ctx, n, plan)
		if !ok {
			return
		}
		t.callOnStepFinish(ctx, step)
		t.tr.finishStep(step)
		t.steps = append(t.steps, *step)
		t.finishReason = step.FinishReason
		if len(t.pending)+len(t.approvals) > 0 {
			t.finishReason = FinishToolCalls
			return
		}
		if len(step.ToolResults) == 0 {
			return
		}
		why := t.stopReason(step)
		if why == "" && t.req.StepBudget != nil {
			why = t.req.StepBudget(ctx)
		}
		if why != "" {
			t.stopGuard(why)
			return
		}
	}
}

// stopReason says why the loop must stop after step although it produced
// tool results ("" to go on): maxSteps or a stopWhen condition.
func (t *turn) stopReason(step *StepResult) string {
	done := len(t.steps)
	if done >= t.maxSteps {
		return "maxSteps"
	}
	for _, c := range t.cfg.StopWhen {
		switch c.Type {
		case StopStepCount:
			if done >= c.Count {
				return "stopWhen stepCount " + strconv.Itoa(c.Count)
			}
		case StopHasToolCall:
			for _, call := range step.ToolCalls {
				if call.ToolName == c.ToolName {
					return "stopWhen hasToolCall " + strconv.Quote(c.ToolName)
				}
			}
		}
	}
	return ""
}

// stopGuard ends a turn that stopped right after tool results with a short
// text step. Without it the AI SDK client, whose
// lastAssistantMessageIsCompleteWithToolCalls cannot tell server-run tools
// from its own, would resubmit the conversation at once and loop
// (protocols.md A.8). The guard is not a model step: no hooks fire for it
// and it is not in TurnResult.Steps.
func (t *turn) stopGuard(why string) {
	n := len(t.steps)
	unit := "steps"
	if n == 1 {
		unit = "step"
	}
	text := fmt.Sprintf("Stopped after %d %s (%s).", n, unit, why)
	id := "stop-" + strconv.Itoa(n)
	t.emit(Event{Type: EventStartStep})
	t.msg.Parts = append(t.msg.Parts, UIPart{Type: PartStepStart}, UIPart{Type: PartText, Text: text, State: StateDone})
	t.emit(Event{Type: EventTextStart, ID: id})
	t.emit(Event{Type: EventTextDelta, ID: id, Delta: text})
	t.emit(Event{Type: EventTextEnd, ID: id})
	t.emit(Event{Type: EventFinishStep})
}

// stepPlan is one model step as prepared by prepareStep: the request, the
// provider and model name it goes to, and the tools that may execute.
type stepPlan struct {
	req    *ModelRequest
	prov   Provider
	model  string
	active []string
}

// prepareStep runs beforeStep and builds the step's model request. On
// failure it returns the stage to report: StagePolicy for a beforeStep
// error or panic, StageSetup for a model override that does not resolve
// (the same stage as an unknown model in the turn's configuration).
func (t *turn) prepareStep(ctx context.Context, n int) (stepPlan, string, error) {
	sc, err := callBeforeStep(ctx, t.hooks, &PrepareStepContext{
		Identity:    t.identity(),
		StepNumber:  n,
		Steps:       slices.Clip(t.steps),
		Model:       t.model,
		System:      t.system,
		Messages:    slices.Clip(t.messages),
		ActiveTools: t.active,
		Turn:        t.turnCtx,
	})
	if err != nil {
		return stepPlan{}, StagePolicy, fmt.Errorf("beforeStep %d: %w", n, err)
	}
	cfg := &t.cfg
	req := &ModelRequest{
		Model:            t.upstream,
		System:           t.system,
		Messages:         t.messages,
		Tools:            t.activeInfos,
		ToolChoice:       cfg.ToolChoice,
		MaxOutputTokens:  cfg.MaxOutputTokens,
		Temperature:      cfg.Temperature,
		TopP:             cfg.TopP,
		TopK:             cfg.TopK,
		PresencePenalty:  cfg.PresencePenalty,
		FrequencyPenalty: cfg.FrequencyPenalty,
		Seed:             cfg.Seed,
		Headers:          cfg.Headers,
		ProviderOptions:  cfg.ProviderOptions,
		Output:           cfg.Output,
		SendReasoning:    t.sendReasoning,
		SystemBlocks:     t.systemBlocks(t.system),
		CachePrompt:      t.req.Session != nil && t.req.Session.CachePrompt,
	}
	if rc := t.req.RequestToolChoice; cfg.ToolChoice == nil && rc != nil && (rc.Type == ToolChoiceNone || n == 0) {
		req.ToolChoice = rc
	}
	if cfg.StopSequences != nil {
		req.StopSequences = *cfg.StopSequences
	}
	plan := stepPlan{req: req, prov: t.provider, model: t.model, active: t.active}
	if sc == nil {
		return plan, "", nil
	}
	if sc.Model != nil && *sc.Model != t.model {
		p, upstream, err := t.resolve(*sc.Model)
		if err != nil {
			return stepPlan{}, StageSetup, fmt.Errorf("beforeStep %d: %w", n, err)
		}
		plan.prov, plan.model, req.Model = p, *sc.Model, upstream
	}
	if sc.System != nil {
		req.System, req.SystemBlocks = *sc.System, t.systemBlocks(*sc.System)
	}
	if sc.Messages != nil {
		req.Messages = *sc.Messages
	}
	if sc.ToolChoice != nil {
		req.ToolChoice = sc.ToolChoice
	}
	if sc.ActiveTools != nil {
		plan.active = *sc.ActiveTools
		req.Tools = t.toolInfos(plan.active)
	}
	req.ProviderOptions = mergeMap(req.ProviderOptions, sc.ProviderOptions)
	return plan, "", nil
}

// stepState collects one model step as its parts arrive.
type stepState struct {
	text      []byte
	reasoning []string
	calls     []ToolCall
	validJSON []bool // per call: whether the model's input was JSON
	finish    StreamPart
	toolParts map[string]int // toolCallId → index in msg.Parts
}

// runStep streams one model step, then resolves its tool calls. It returns
// false when the turn ended (error or abort) during the step.
func (t *turn) runStep(parent, ctx context.Context, n int, plan stepPlan) (*StepResult, bool) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var timer *time.Timer
	chunkTimeout := time.Duration(t.timeout.ChunkMs) * time.Millisecond
	if chunkTimeout > 0 {
		timer = time.AfterFunc(chunkTimeout, func() { cancel(errChunkTimeout) })
		defer timer.Stop()
	}
	stream, ok, err := t.open(t.tr.startModel(stepCtx, plan.req, plan.model), plan.prov, plan.req, timer, chunkTimeout)
	if err != nil {
		t.tr.endModel(nil, err, nil)
		if !t.interrupted(parent, ctx, stepCtx) {
			t.fail(ctx, StageStream, fmt.Errorf("step %d: %w", n, err))
		}
		return nil, false
	}
	defer stream.Close()
	t.stepOpen = true
	t.emit(Event{Type: EventStartStep})
	t.msg.Parts = append(t.msg.Parts, UIPart{Type: PartStepStart})
	var st stepState
	t.chunk.StepNumber = n
	t.chunk.Identity = t.identity()
	for ok {
		if timer != nil {
			timer.Reset(chunkTimeout)
		}
		p := stream.Current()
		if p.Type == StreamToolCall {
			// Normalised before onChunk, so every observer can serialise
			// the part even when the model's arguments are not JSON.
			var valid bool
			p.Input, valid = callInput(p.Input)
			st.validJSON = append(st.validJSON, valid)
		}
		t.callOnChunk(ctx, p)
		t.handlePart(&st, p)
		t.flush()
		ok = stream.Next()
	}
	if err := stream.Err(); err != nil || stepCtx.Err() != nil {
		t.tr.endModel(nil, err, nil)
		t.closeBlocks(false)
		if !t.interrupted(parent, ctx, stepCtx) {
			t.fail(ctx, StageStream, fmt.Errorf("step %d: model stream: %w", n, err))
		}
		return nil, false
	}
	if timer != nil {
		timer.Stop()
	}
	t.closeBlocks(true)
	t.tr.endModel(&st.finish, nil, &st)
	step := &StepResult{
		Identity:         t.identity(),
		StepNumber:       n,
		Model:            plan.model,
		Text:             string(st.text),
		Reasoning:        st.reasoning,
		ReasoningText:    strings.Join(st.reasoning, ""),
		ToolCalls:        st.calls,
		FinishReason:     finishReason(st.finish.FinishReason, len(st.calls) > 0),
		RawFinishReason:  st.finish.RawFinishReason,
		Warnings:         st.finish.Warnings,
		ProviderMetadata: st.finish.ProviderMetadata,
	}
	if st.finish.Usage != nil {
		step.Usage = *st.finish.Usage
	}
	if len(st.calls) > 0 {
		if !t.resolveTools(parent, ctx, step, plan.req.Messages, plan.active, &st) {
			return nil, false
		}
	}
	t.appendStepMessages(step)
	t.stepOpen = false
	t.emit(Event{Type: EventFinishStep})
	return step, true
}

// open starts the model stream and reads its first part, retrying
// retryable upstream failures that happen before that first part with
// exponential backoff (honouring Retry-After). ok is false for a stream that
// ended without parts.
func (t *turn) open(ctx context.Context, prov Provider, req *ModelRequest, timer *time.Timer, chunkTimeout time.Duration) (Stream, bool, error) {
	for attempt := 0; ; attempt++ {
		if timer != nil {
			timer.Reset(chunkTimeout)
		}
		t.flush()
		stream, err := t.startStream(ctx, prov, req)
		if err == nil {
			if stream.Next() {
				return stream, true, nil
			}
			if err = stream.Err(); err == nil {
				return stream, false, nil
			}
			stream.Close()
		}
		if timer != nil {
			timer.Stop()
		}
		if retry, cerr := t.compactAfterOverflow(ctx, req, err); retry || cerr != nil {
			if cerr != nil {
				return nil, false, cerr
			}
			continue
		}
		var ue *UpstreamError
		if ctx.Err() != nil || !errors.As(err, &ue) || !retryable(classifyUpstream(ue)) || attempt >= t.maxRetries || ue.RetryAfter > maxRetryAfter {
			return nil, false, err
		}
		delay := t.e.opts.RetryBaseDelay << attempt
		if ue.RetryAfter > 0 {
			delay = ue.RetryAfter
		}
		t.log.Warn("engine: retrying model request", "requestId", t.req.RequestID, "attempt", attempt+1, "delay", delay, "err", err)
		wait := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, false, err
		case <-wait.C:
		}
	}
}

// handlePart applies one model stream part to the message, the events and
// the step state.
func (t *turn) handlePart(st *stepState, p StreamPart) {
	switch p.Type {
	case StreamTextStart:
		t.openBlock(p.ID, false)
	case StreamTextDelta:
		b := t.block(p.ID, false)
		b.buf = append(b.buf, p.Text...)
		st.text = append(st.text, p.Text...)
		t.emit(Event{Type: EventTextDelta, ID: p.ID, Delta: p.Text})
	case StreamTextEnd:
		t.endBlock(p.ID, false, st, nil)
	case StreamReasoningStart:
		t.openBlock(p.ID, true)
	case StreamReasoningDelta:
		b := t.block(p.ID, true)
		b.buf = append(b.buf, p.Text...)
		if t.sendReasoning {
			t.emit(Event{Type: EventReasoningDelta, ID: p.ID, Delta: p.Text})
		}
	case StreamReasoningEnd:
		t.endBlock(p.ID, true, st, p.ProviderMetadata)
	case StreamToolInputStart:
		t.toolPart(st, p.ToolCallID, p.ToolName)
		t.emit(Event{Type: EventToolInputStart, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Dynamic: t.isDynamic(p.ToolName)})
	case StreamToolInputDelta:
		if _, ok := st.toolParts[p.ToolCallID]; ok {
			t.emit(Event{Type: EventToolInputDelta, ToolCallID: p.ToolCallID, InputTextDelta: p.Text})
		}
	case StreamToolCall:
		i := t.toolPart(st, p.ToolCallID, p.ToolName)
		t.msg.Parts[i].Input = p.Input
		st.calls = append(st.calls, ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: p.Input, Dynamic: t.isDynamic(p.ToolName)})
	case StreamFinish:
		st.finish = p
	}
}

// callInput normalises a tool call's input: empty becomes {} (providers
// send no arguments for parameterless tools) and text that is not JSON
// becomes a JSON string holding it, with valid false, so the call is
// reported to the model as a tool-input error and the input still
// serialises everywhere (events, hook contexts, audit).
func callInput(in json.RawMessage) (_ json.RawMessage, valid bool) {
	switch {
	case len(in) == 0:
		return emptyObject, true
	case !json.Valid(in):
		return jsonString(string(in)), false
	}
	return in, true
}

func (t *turn) isDynamic(name string) bool {
	i, ok := t.toolIndex[name]
	return ok && t.tools[i].Dynamic
}

// toolPart returns the index of the message part of a tool call, creating
// it in state input-streaming.
func (t *turn) toolPart(st *stepState, id, name string) int {
	if i, ok := st.toolParts[id]; ok {
		return i
	}
	if st.toolParts == nil {
		st.toolParts = make(map[string]int, 2)
	}
	part := UIPart{Type: PartToolPrefix + name, ToolCallID: id, State: ToolStateInputStreaming}
	if t.isDynamic(name) {
		part.Type, part.ToolName = PartDynamicTool, name
	}
	t.msg.Parts = append(t.msg.Parts, part)
	st.toolParts[id] = len(t.msg.Parts) - 1
	return len(t.msg.Parts) - 1
}

// openBlock starts a text or reasoning part. Reasoning parts are kept out
// of the message and the events when sendReasoning is off.
func (t *turn) openBlock(id string, reasoning bool) *textBlock {
	var b *textBlock
	if n := len(t.free); n > 0 {
		b, t.free = t.free[n-1], t.free[:n-1]
		b.buf = b.buf[:0]
	} else {
		b = &textBlock{}
	}
	b.id, b.reasoning, b.part = id, reasoning, -1
	t.blocks = append(t.blocks, b)
	switch {
	case !reasoning:
		t.msg.Parts = append(t.msg.Parts, UIPart{Type: PartText, State: StateStreaming})
		b.part = len(t.msg.Parts) - 1
		t.emit(Event{Type: EventTextStart, ID: id})
	case t.sendReasoning:
		t.msg.Parts = append(t.msg.Parts, UIPart{Type: PartReasoning, State: StateStreaming})
		b.part = len(t.msg.Parts) - 1
		t.emit(Event{Type: EventReasoningStart, ID: id})
	}
	return b
}

// block returns the open block with id, opening one if the provider sent a
// delta without a start.
func (t *turn) block(id string, reasoning bool) *textBlock {
	for _, b := range t.blocks {
		if b.id == id && b.reasoning == reasoning {
			return b
		}
	}
	return t.openBlock(id, reasoning)
}

// endBlock closes the block with id, writing its text into its part and
// meta, the provider's metadata of its end (a thinking block's signature),
// into the part and its end event.
func (t *turn) endBlock(id string, reasoning bool, st *stepState, meta json.RawMessage) {
	for i, b := range t.blocks {
		if b.id == id && b.reasoning == reasoning {
			t.finishBlock(b, true, st, meta)
			t.blocks = append(t.blocks[:i], t.blocks[i+1:]...)
			t.free = append(t.free, b)
			return
		}
	}
}

// closeBlocks closes every open block. With events false (a failed or
// aborted stream) no end events are sent, as the AI SDK server does, and
// the parts keep their "streaming" state, as the AI SDK client keeps them:
// the stored message and the client's agree that the text was cut off
// (the message's metadata says why, see markInterrupted).
func (t *turn) closeBlocks(events bool) {
	for _, b := range t.blocks {
		t.finishBlock(b, events, nil, nil)
		t.free = append(t.free, b)
	}
	t.blocks = t.blocks[:0]
}

func (t *turn) finishBlock(b *textBlock, events bool, st *stepState, meta json.RawMessage) {
	if b.reasoning && st != nil {
		st.reasoning = append(st.reasoning, string(b.buf))
	}
	if b.part < 0 {
		return
	}
	p := &t.msg.Parts[b.part]
	p.Text = string(b.buf)
	if !events {
		return
	}
	p.State = StateDone
	if b.reasoning {
		if len(meta) > 0 {
			p.ProviderMetadata = meta
		}
		t.emit(Event{Type: EventReasoningEnd, ID: b.id, ProviderMetadata: meta})
	} else {
		t.emit(Event{Type: EventTextEnd, ID: b.id})
	}
}

// finishReason normalises a provider's finish reason to the AI SDK's set.
func finishReason(r string, calls bool) string {
	switch r {
	case FinishStop, FinishLength, FinishContentFilter, FinishToolCalls, FinishError, FinishOther:
		return r
	case "":
		if calls {
			return FinishToolCalls
		}
		return FinishStop
	}
	return FinishOther
}

// appendStepMessages adds the step's assistant message and tool results to
// the model messages of the next step.
func (t *turn) appendStepMessages(step *StepResult) {
	var content []ContentPart
	for _, r := range step.Reasoning {
		content = append(content, ContentPart{Type: ContentReasoning, Text: r})
	}
	if step.Text != "" {
		content = append(content, ContentPart{Type: ContentText, Text: step.Text})
	}
	var results []ContentPart
	for _, r := range step.ToolResults {
		content = append(content, ContentPart{Type: ContentToolCall, ToolCallID: r.ToolCallID, ToolName: r.ToolName, Input: r.Input})
		out := r.Output
		if r.IsError {
			out = jsonString(r.ErrorText)
		}
		results = append(results, ContentPart{Type: ContentToolResult, ToolCallID: r.ToolCallID, ToolName: r.ToolName, Output: out, IsError: r.IsError})
	}
	if len(content) > 0 {
		t.messages = append(t.messages, ModelMessage{Role: RoleAssistant, Content: content})
	}
	if len(results) > 0 {
		t.messages = append(t.messages, ModelMessage{Role: RoleTool, Content: results})
	}
}

// interrupted reports whether the turn was aborted or timed out, and ends
// it accordingly. stepCtx, if not nil, carries the chunk timeout.
func (t *turn) interrupted(parent, ctx, stepCtx context.Context) bool {
	switch {
	case parent.Err() != nil:
		t.abort()
	case context.Cause(ctx) == errTotalTimeout:
		t.fail(ctx, StageStream, &publicError{msg: fmt.Sprintf("turn timed out after %dms (timeout.totalMs)", t.timeout.TotalMs), cause: ErrModelTimeout})
	case stepCtx != nil && context.Cause(stepCtx) == errChunkTimeout:
		t.fail(ctx, StageStream, &publicError{msg: fmt.Sprintf("model stream stalled: no chunk for %dms (timeout.chunkMs)", t.timeout.ChunkMs), cause: errors.Join(ErrModelTimeout, errChunkTimeout)})
	default:
		return false
	}
	return true
}

// abort ends the turn as aborted: the partial message is kept and one
// `abort` event is sent.
func (t *turn) abort() {
	if t.status != "" {
		return
	}
	t.closeBlocks(false)
	t.status, t.finishReason = StatusAborted, FinishInterrupted
	t.emit(Event{Type: EventMessageMetadata, MessageMetadata: t.markInterrupted(StatusAborted)})
	t.emit(Event{Type: EventAbort})
}

// interruptedKey is the message metadata key that marks an assistant
// message whose turn was aborted or failed: its value is the turn's status,
// and the message may be partial (its cut-off text parts are "streaming").
const interruptedKey = "interrupted"

// markInterrupted records status under interruptedKey in the message's
// metadata (kept when it is an object) and returns the metadata update the
// client merges.
func (t *turn) markInterrupted(status string) json.RawMessage {
	meta := map[string]any{}
	_ = json.Unmarshal(t.msg.Metadata, &meta) // not an object: replaced
	if meta == nil {
		meta = map[string]any{}
	}
	meta[interruptedKey] = status
	t.msg.Metadata, _ = json.Marshal(meta)
	update, _ := json.Marshal(map[string]string{interruptedKey: status})
	return update
}

// clearInterrupted settles a completed continuation of an interrupted
// message: the mark is removed and the parts cut off earlier are done. It
// returns the metadata update for the client, nil when there was no mark.
func (t *turn) clearInterrupted() json.RawMessage {
	meta := map[string]any{}
	if json.Unmarshal(t.msg.Metadata, &meta) != nil {
		return nil
	}
	if _, ok := meta[interruptedKey]; !ok {
		return nil
	}
	delete(meta, interruptedKey)
	t.msg.Metadata = nil
	if len(meta) > 0 {
		t.msg.Metadata, _ = json.Marshal(meta)
	}
	for i := range t.msg.Parts {
		if p := &t.msg.Parts[i]; p.State == StateStreaming && (p.Type == PartText || p.Type == PartReasoning) {
			p.State = StateDone
		}
	}
	return json.RawMessage(`{"` + interruptedKey + `":null}`)
}

// fail is the one error path for every stage: onChatError may replace the
// client-visible text (masked by default unless the engine made the error),
// then `error`, `finish-step` (if a step is open) are sent; `finish` follows
// in end.
func (t *turn) fail(ctx context.Context, stage string, err error) {
	if t.status != "" {
		return
	}
	t.closeBlocks(false)
	t.status, t.finishReason = StatusError, FinishError
	t.errClass = ClassifyError(stage, err)
	t.errText = t.chatError(ctx, stage, t.errClass, err, maskedErrorText)
	t.log.Warn("engine: turn failed", "requestId", t.req.RequestID, "stage", stage, "err", err)
	t.tr.fail(stage, err)
	t.emit(Event{Type: EventError, ErrorText: t.errText})
	if t.stepOpen {
		t.stepOpen = false
		t.emit(Event{Type: EventFinishStep})
	}
}

// chatError consults onChatError and returns the text clients (and, for
// tool errors, the model) see: the hook's replacement, or def — except that
// a PublicError (an engine-made one among them) shows its own text. class
// is err's ClassifyError class.
func (t *turn) chatError(ctx context.Context, stage, class string, err error, def string) string {
	if msg, ok := PublicText(err); ok {
		def = msg
	}
	ec := &ChatErrorContext{
		Identity:       t.identity(),
		Stage:          stage,
		Err:            err,
		Message:        err.Error(),
		Class:          class,
		PartialMessage: len(t.msg.Parts) > 0,
		At:             time.Now(),
	}
	if r := t.callOnChatError(context.WithoutCancel(ctx), ec); r != nil {
		return r.Error()
	}
	return def
}

// end settles the status (validating structured output), sends the final
// event, fires onChatResponse and builds the result.
func (t *turn) end(ctx context.Context) *TurnResult {
	obs := context.WithoutCancel(ctx)
	if t.status == "" && t.cfg.Output != nil {
		t.structuredOutput(ctx)
	}
	if t.status == "" {
		t.status = StatusCompleted
	}
	var meta json.RawMessage
	switch t.status {
	case StatusCompleted:
		meta = t.clearInterrupted()
	case StatusError:
		meta = t.markInterrupted(StatusError)
	}
	if t.status != StatusAborted {
		t.emit(Event{Type: EventFinish, FinishReason: t.finishReason, MessageMetadata: meta})
	}
	t.flush()
	res := &TurnResult{
		Message:          t.msg,
		Status:           t.status,
		Error:            t.errText,
		ErrorClass:       t.errClass,
		FinishReason:     t.finishReason,
		Steps:            t.steps,
		Output:           t.output,
		PendingToolCalls: t.pending,
		PendingApprovals: t.approvals,
		Continuation:     t.req.Continuation,
	}
	for i := range t.steps {
		res.Usage = res.Usage.Add(t.steps[i].Usage)
	}
	t.callOnChatResponse(obs, &ChatResponseResult{
		Identity:     t.identity(),
		Message:      t.msg,
		Continuation: t.req.Continuation,
		Status:       t.status,
		Error:        t.errText,
		ErrorClass:   t.errClass,
		FinishReason: t.finishReason,
		Steps:        len(t.steps),
		Usage:        res.Usage,
		DurationMs:   float64(time.Since(t.begin).Microseconds()) / 1000,
	})
	t.tr.endTurn(t, res)
	return res
}

// structuredOutput validates the final step's text against the output
// schema and keeps its parsed value.
func (t *turn) structuredOutput(ctx context.Context) {
	if len(t.pending)+len(t.approvals) > 0 {
		return // the answer comes in a later turn
	}
	var text string
	if n := len(t.steps); n > 0 {
		text = t.steps[n-1].Text
	}
	if err := t.e.schemas.validate(t.cfg.Output.Schema, json.RawMessage(text)); err != nil {
		t.fail(ctx, StageStream, publicErrorf("structured output: the final answer does not match the output schema: %v", err))
		return
	}
	t.output = compactJSON([]byte(text))
}

func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}
