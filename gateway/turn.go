package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/uistream"
	"github.com/turngate/turngate/internal/tracing"
	"github.com/turngate/turngate/policy/ruleset"
)

// errShuttingDown refuses new turns once shutdown began; it maps to 503.
var errShuttingDown = errors.New("gateway is shutting down")

// StatusSkipped is the status of a turn that did not run: continueLastTurn
// without an assistant message to continue, or a resubmission that carries
// nothing new (the A.8 guard).
const StatusSkipped = "skipped"

// persistTimeout bounds the store writes after a turn; they run on a
// context detached from the turn's, so an aborted turn still persists.
const persistTimeout = 10 * time.Second

// turnInput is what an entry path hands the turn pipeline.
type turnInput struct {
	agent     *agent
	principal engine.Principal
	sessionID string
	entry     string
	requestID string
	// live is the running turn's context, once begun: its deadline and
	// abort signal are the beforePersist hook's (Server.persister).
	live context.Context
	// create makes the session when it does not exist; otherwise a missing
	// session is a 404.
	create bool
	// body, when setBody, is the request's custom body: it becomes
	// TurnContext.body and the session's stored last body. Otherwise the
	// stored last body is used.
	body    map[string]any
	setBody bool
	// bounded makes the lock wait fail with errQueueFull when the session's
	// queue is full (HTTP requests); workers wait without bound.
	bounded bool
	// ephemeral turns (OpenAI-compatible) have no stored session: prepare
	// fills the transcript and nothing is persisted.
	ephemeral bool
	// prepare changes the transcript under the turn lock (persisting the
	// request's user message before the model runs) and returns the plan.
	prepare func(ctx context.Context, tx *transcript) (*plan, error)
	// extraTools are per-request tools (OpenAI and Anthropic client tools).
	extraTools []engine.Tool
	// toolChoice is the request's tool_choice (engine.TurnRequest's
	// RequestToolChoice).
	toolChoice *engine.ToolChoice
	// onEvent also receives every event (the OpenAI encoder).
	onEvent func(engine.Event)
	// holding is the session's lease when replicas share the store (see
	// replicas); nil otherwise.
	holding *holding
	// rev is the rule revision of the turn, taken when it is admitted
	// under the session's lock: its beforePersist rules mask what prepare
	// stores, and the turn runs on it.
	rev *ruleset.Revision
}

// plan is what prepare decided.
type plan struct {
	// skip, when set, runs no model turn; the response is guardFrames.
	skip bool
	// skipMessageID is the message id the skipped response names.
	skipMessageID string
	// skipError, when set, is an error chunk's text before the skipped
	// response's finish: why the request changed nothing (an approval
	// answer the gateway ignored), so the client is not left to believe
	// it counted.
	skipError    string
	continuation bool
	// messageID is the assistant message id (the continued one on
	// continuations).
	messageID string
	// entry overrides the input's entry path (tool results in chat).
	entry string
	// clientResults are the tool call ids whose client outputs the
	// continuation brings (engine.TurnRequest.ClientToolResults).
	clientResults []string
	// approvals are the decided approvals the continuation applies
	// (engine.TurnRequest.ApprovalResponses, approvals.go).
	approvals []engine.ApprovalResponse
	// waiting are the approvals a skipped turn still waits for; its
	// result reports them.
	waiting []engine.PendingApproval
}

// turn is one admitted turn: running, or already done when skipped.
type turn struct {
	requestID string
	key       string
	// messageID is the assistant message the turn writes (the continued
	// one on continuations).
	messageID string
	buf       *uistream.Buffer
	done      chan struct{}
	cancel    context.CancelFunc
	// result and status are set before done is closed; so is err, the
	// raw error of a failed turn, which the OpenAI endpoint maps to a
	// status.
	result *engine.TurnResult
	status string
	err    error
	// writeErr is the error of the turn's final write when it failed:
	// nothing of the turn's end is stored, and the entry paths answer
	// it as a failure (503 store_unavailable) whatever the engine said.
	writeErr error
}

// wait waits for the turn to end or ctx to be done.
func (t *turn) wait(ctx context.Context) error {
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sessionKey(tenant, sessionID string) string { return tenant + "\x00" + sessionID }

// newID returns a fresh id with prefix.
func newID(prefix string) string { return prefix + uuid.NewString() }

// begin admits a turn: it takes the session's turn lock (queueing behind a
// running turn), loads the stored transcript, lets in.prepare apply the
// request, and starts the model turn on a context detached from the
// request's, so a client that disconnects does not stop it. Errors before
// the model starts are returned (and become JSON errors); after that,
// everything is in the turn's stream and result.
func (s *Server) begin(ctx context.Context, in *turnInput) (*turn, error) {
	if s.closing.Load() {
		return nil, errShuttingDown
	}
	admitted, err := s.admitTurn(ctx, in)
	if err != nil {
		return nil, err
	}
	t, err := s.lockAndAdmit(ctx, in)
	if err != nil {
		s.unadmit(ctx, in, admitted)
		return nil, err
	}
	return t, nil
}

// lockAndAdmit takes the session's turn lock and admits the turn (begin).
func (s *Server) lockAndAdmit(ctx context.Context, in *turnInput) (*turn, error) {
	key := sessionKey(in.principal.Tenant, in.sessionID)
	var release func()
	var err error
	if s.rep != nil && !in.ephemeral {
		ctx, release, err = s.rep.take(ctx, in, key)
	} else {
		release, err = s.locks.acquire(ctx, key, in.bounded)
	}
	if err != nil {
		return nil, err
	}
	t, err := s.admit(ctx, in, key, release)
	if err != nil {
		release()
		return nil, err
	}
	return t, nil
}

// admit runs under the turn lock; on success the lock passes to the turn.
// It counts the turn among those Shutdown waits for from the start, so the
// stores it makes are waited for too.
func (s *Server) admit(ctx context.Context, in *turnInput, key string, release func()) (*turn, error) {
	if !s.enterTurn() {
		return nil, errShuttingDown
	}
	// Until the run goroutine takes the count over, admit gives it back on
	// every way out: an error, a skipped turn, a panic.
	running := false
	defer func() {
		if !running {
			s.turns.Done()
		}
	}()
	in.rev = s.rules.Current()
	s.warnPersistInputs(in.rev)
	tx := &transcript{tenant: in.principal.Tenant, session: in.sessionID, principal: in.principal, answer: s.answerPlan}
	body := in.body
	if !in.ephemeral {
		tx.st = s.store
		tx.persist = s.persister(in)
		sess, msgs, err := s.session(ctx, in)
		if err != nil {
			return nil, err
		}
		tx.messages = msgs
		// The session's creation and the request's body are stored with
		// the first write of prepare (with the user message, in one
		// transaction), or after it when prepare writes nothing.
		if sess == nil || in.setBody {
			tx.pending = &admission{agent: in.agent.name}
			if in.setBody {
				tx.pending.body = encodeBody(in.body)
			}
		}
		if !in.setBody && sess != nil && len(sess.LastBody) > 0 {
			_ = json.Unmarshal(sess.LastBody, &body)
		}
	}
	waiting := awaitingMessage(tx)
	p, err := in.prepare(ctx, tx)
	if err == nil {
		err = tx.admit(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	s.supersedeApprovals(ctx, tx, waiting)
	t := &turn{requestID: in.requestID, key: key, done: make(chan struct{}), cancel: func() {}}
	if p.skip {
		t.buf = uistream.NewBuffer()
		for _, ev := range guardEvents(p.skipMessageID, p.skipError) {
			frame, _ := uistream.EventFrame(ev)
			t.buf.Append(frame)
		}
		t.buf.Close()
		t.status = StatusSkipped
		t.result = &engine.TurnResult{Status: StatusSkipped, Message: engine.UIMessage{ID: p.skipMessageID, Role: engine.RoleAssistant, Parts: []engine.UIPart{}},
			PendingApprovals: p.waiting}
		now := time.Now()
		if err := s.recordTurn(ctx, in, t.result, now, now); err != nil {
			return nil, err // begin releases the lock
		}
		release()
		close(t.done)
		return t, nil
	}
	if p.entry != "" {
		in.entry = p.entry
	}
	if p.messageID == "" {
		p.messageID = newID("msg_")
	}
	in.body = body
	t.buf = uistream.NewBuffer()
	parent := s.baseCtx
	if in.holding != nil {
		parent = in.holding.ctx
		s.rep.attach(in.holding, t.buf)
	}
	runCtx, cancel := context.WithTimeout(tracing.Follow(parent, ctx), s.conf().Limits.TurnTimeout)
	t.cancel = cancel
	in.live = runCtx
	t.messageID = p.messageID
	s.mu.Lock()
	s.active[key] = t
	s.wakeHeld(key)
	s.mu.Unlock()
	running = true
	go s.run(runCtx, t, in, p, tx.messages, release)
	return t, nil
}

// enterTurn counts a turn Shutdown must wait for, unless shutdown has
// begun. The count and the closing flag change under mu, so no turn is
// counted while Shutdown waits: sync.WaitGroup forbids an Add from zero
// concurrent with Wait, and such a turn would not be waited for.
func (s *Server) enterTurn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.turns.Add(1)
	return true
}

// session loads the input's session and its transcript, answering 404
// for a session of another agent as for a missing one. A missing session
// is nil when the input creates it (the transcript's admission does).
func (s *Server) session(ctx context.Context, in *turnInput) (*store.Session, []engine.UIMessage, error) {
	sess, msgs, err := s.store.Transcript(ctx, in.principal.Tenant, in.sessionID)
	if in.create && errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("loading transcript: %w", err)
	}
	if sess.Agent != in.agent.name {
		return nil, nil, errSessionNotFound
	}
	return sess, msgs, nil
}

// guardEvents is the response of a skipped turn: a start naming the last
// assistant message (so the client does not add one) and a finish with
// finishReason "interrupted", the one reason that stops useChat's
// sendAutomaticallyWhen from resubmitting (protocols.md A.8, A.11).
func guardEvents(messageID, errorText string) []engine.Event {
	evs := []engine.Event{{Type: engine.EventStart, MessageID: messageID}}
	if errorText != "" {
		evs = append(evs, engine.Event{Type: engine.EventError, ErrorText: errorText})
	}
	return append(evs, engine.Event{Type: engine.EventFinish, FinishReason: engine.FinishInterrupted})
}

func encodeBody(body map[string]any) json.RawMessage {
	if body == nil {
		return nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil
	}
	return b
}

// run runs the model turn, then persists the assistant message (the
// partial one too) and the outcome in one transaction, releases the turn lock and only
// then fires the deferred onChatResponse observers: onChatResponse runs
// after the message is persisted and after the lock is released, so an
// observer may start the session's next turn.
func (s *Server) run(ctx context.Context, t *turn, in *turnInput, p *plan, messages []engine.UIMessage, release func()) {
	defer s.turns.Done()
	defer t.cancel()
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	failed := &writeFailure{cancel: abort}
	start := time.Now()
	rev := in.rev
	catcher := &responseCatcher{}
	var held [][]byte
	// finish is the engine's finish event, held back until the turn's
	// writes are stored: a turn whose writes failed ends with an error
	// chunk before its finish (endFrames).
	var finish *engine.Event
	// output says model output waits in held; chunked, that the first
	// of it reached the client's stream (turngate_time_to_first_chunk_seconds).
	var output, chunked bool
	flush := func() {
		if output && !chunked {
			chunked = true
			s.metrics.FirstChunk.WithLabelValues(in.agent.name).Observe(time.Since(start).Seconds())
		}
		t.buf.Append(held...)
		held = held[:0]
	}
	// The catcher comes first so that it sees the raw chat error.
	// Extensions run after the rules (the reference's order).
	// The kill switches come before the rules: a stopped call runs no rule
	// (and counts in no declared state). The quotas' observer records the
	// steps' token usage.
	hooks := engine.Compose(catcher, s.kill.Hooks(), s.state.Hooks(rev, s.extensions.Wrap(rev.Hooks(s.recorder, s.failurePolicy))),
		s.quotas.Hooks(), withoutResponse{s.observers})
	identity := engine.Identity{
		RequestID: in.requestID,
		SessionID: in.sessionID,
		Agent:     in.agent.name,
		Principal: in.principal,
		EntryPath: in.entry,
	}
	req := &engine.TurnRequest{
		Identity:          identity,
		Model:             in.agent.model,
		System:            in.agent.system,
		Messages:          messages,
		Tools:             append(s.agentTools(in.agent), in.extraTools...),
		ToolLimits:        toolLimits(s.conf().Limits),
		Defaults:          in.agent.defaults,
		RequestToolChoice: in.toolChoice,
		Continuation:      p.continuation,
		ClientToolResults: p.clientResults,
		ApprovalResponses: p.approvals,
		MessageID:         p.messageID,
		Body:              in.body,
		Journal:           s.journalFor(in, failed),
		Hooks:             hooks,
		StepBudget:        s.stepBudget(identity),
		// Frames wait in held until the engine is about to wait, so the
		// events of one model part or tool round reach the client in one
		// write.
		Emit: func(ev engine.Event) {
			if ev.Type == engine.EventToolApprovalRequest {
				describeApproval(&ev, in.principal, nil)
			}
			if ev.Type == engine.EventFinish {
				finish = &ev
			} else if frame, err := uistream.EventFrame(ev); err == nil {
				held = append(held, frame)
				output = output || modelOutput[ev.Type]
			} else {
				s.log.Error("encoding stream event", "type", ev.Type, "err", err)
			}
			if in.onEvent != nil {
				in.onEvent(ev)
			}
		},
		Flush: flush,
	}
	res := s.applySession(ctx, in, req)
	if res == nil {
		res = s.runEngine(ctx, req)
	}
	res = fencedResult(ctx, res)
	jerr := failed.failure()
	if jerr != nil {
		notStored(res)
	}
	flush() // the events of a recovered panic or a failed session context

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	s.recordApprovals(pctx, in, res)
	werr := cmp.Or(s.recordTurn(s.rep.finishing(pctx, in), in, res, start, time.Now()), jerr)
	t.buf.Append(endFrames(finish, res, werr)...)
	s.observeSession(pctx, in, req, res)

	t.result, t.status, t.err, t.writeErr = res, res.Status, catcher.err, werr
	s.mu.Lock()
	if s.active[t.key] == t {
		delete(s.active, t.key)
	}
	s.mu.Unlock()
	t.buf.Close()
	release()
	if catcher.result != nil {
		catcher.result.Message = res.Message
		s.observers.OnChatResponse(pctx, catcher.result)
	}
	close(t.done)
}

// modelOutput are the stream events that carry the model's output: the
// first of them to reach the client is a turn's first chunk.
var modelOutput = map[string]bool{engine.EventTextDelta: true, engine.EventReasoningDelta: true,
	engine.EventToolInputStart: true, engine.EventToolInputAvailable: true}

// runEngine runs the engine, turning a panic into an error result so one
// bad turn never takes the gateway down.
func (s *Server) runEngine(ctx context.Context, req *engine.TurnRequest) (res *engine.TurnResult) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("engine panicked", "requestId", req.RequestID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res = &engine.TurnResult{
				Message: engine.UIMessage{ID: req.MessageID, Role: engine.RoleAssistant},
				Status:  engine.StatusError, Error: maskedErrorText, ErrorClass: engine.ClassUnknown, FinishReason: engine.FinishError,
			}
			req.Emit(engine.Event{Type: engine.EventError, ErrorText: res.Error})
			req.Emit(engine.Event{Type: engine.EventFinish, FinishReason: engine.FinishError})
		}
	}()
	return s.engine.Run(ctx, req)
}

// recordTurn stores the turn's outcome, with the assistant message when it
// has parts (the partial one too) in the same transaction, then writes it to
// the audit log and the metrics, and returns the store's error. A write
// that failed on an unavailable store is tried again while ctx lasts; when it still fails, res becomes an error (the audit
// and the metrics say so) and the caller tells the client. Ephemeral
// turns store nothing.
func (s *Server) recordTurn(ctx context.Context, in *turnInput, res *engine.TurnResult, start, end time.Time) error {
	var err error
	revision := in.rev.ID()
	// stored is the message as the store, and the audit log's turn
	// record, keep it: masked by the beforePersist rules.
	stored, perr := res.Message, error(nil)
	if len(res.Message.Parts) > 0 {
		stored, perr = s.persister(in)(ctx, res.Message)
	}
	if !in.ephemeral {
		rec := &store.TurnRecord{
			RequestID: in.requestID, Tenant: in.principal.Tenant, SessionID: in.sessionID, Agent: in.agent.name,
			Status: res.Status, FinishReason: res.FinishReason, Error: res.Error, Usage: res.Usage,
			RuleRevision: revision, StartedAt: start, FinishedAt: end,
		}
		// Both writes store the turn's record once, and FinishTurn's
		// upsert of the message is made under the turn's lock (and
		// fenced by its lease): trying them again cannot store anything
		// twice.
		if err = perr; err == nil {
			err = store.RetryWrite(ctx, true, func() error {
				if len(res.Message.Parts) > 0 {
					return s.store.FinishTurn(ctx, in.principal.Tenant, in.sessionID, stored, rec)
				}
				return s.store.RecordTurn(ctx, rec)
			})
		}
		switch {
		case errors.Is(err, errPersistRules):
			s.log.Error("the beforePersist rules failed on the turn's message; nothing of the turn was stored", "requestId", in.requestID,
				"session", in.sessionID, "messageId", res.Message.ID, "err", err)
			res.Status, res.FinishReason, res.Error = engine.StatusError, engine.FinishError, errPersistRulesText
		case errors.Is(err, store.ErrFenced):
			s.log.Error("recording turn", "requestId", in.requestID, "session", in.sessionID, "err", err)
			fenced(res) // nothing of the turn is stored: it is an error
		case err != nil:
			s.log.Error("the turn's end was not stored; the client is told its turn failed", "requestId", in.requestID,
				"session", in.sessionID, "messageId", res.Message.ID, "err", err)
			notStored(res)
		}
	}
	s.metrics.Turn(in.agent.name, in.principal.Tenant, res.Status, end.Sub(start))
	calls := storedCalls(res.Steps, res.Message, stored, perr)
	s.audit.Turn(&audit.Turn{
		Time: end, RequestID: in.requestID, Tenant: in.principal.Tenant, Subject: in.principal.Subject,
		SessionID: in.sessionID, Agent: in.agent.name, EntryPath: in.entry, Revision: revision, Replica: s.conf().Replica.ID,
		Status: res.Status, FinishReason: res.FinishReason, Error: res.Error, ErrorClass: res.ErrorClass, Steps: len(res.Steps),
		ToolCalls: calls, Usage: res.Usage, DurationMs: float64(end.Sub(start).Microseconds()) / 1000,
	})
	return err
}

// storedCalls are the turn's tool calls as its audit record keeps them:
// what the beforePersist rules masked in a call's stored part (its input,
// output or error) masked there too, and none of them when the rules
// failed on the message.
func storedCalls(steps []engine.StepResult, sent, stored engine.UIMessage, perr error) []engine.ToolResult {
	type change struct{ was, is *engine.UIPart }
	changed := map[string]change{}
	for i := range min(len(sent.Parts), len(stored.Parts)) {
		if p := &stored.Parts[i]; p.IsTool() {
			changed[p.ToolCallID] = change{&sent.Parts[i], p}
		}
	}
	var calls []engine.ToolResult
	for _, st := range steps {
		for _, c := range st.ToolResults {
			ch, ok := changed[c.ToolCallID]
			switch {
			case perr != nil:
				c.Input, c.Output, c.ErrorText = nil, nil, ""
			case ok:
				if !bytes.Equal(ch.was.Input, ch.is.Input) {
					c.Input = ch.is.Input
				}
				if !bytes.Equal(ch.was.Output, ch.is.Output) {
					c.Output = ch.is.Output
				}
				if ch.was.ErrorText != ch.is.ErrorText {
					c.ErrorText = ch.is.ErrorText
				}
			}
			calls = append(calls, c)
		}
	}
	return calls
}

// errNotStoredText is the error of a turn whose end the store did not
// store.
const errNotStoredText = "the store is unavailable: this turn was not stored in full; retry"

// notStored makes res, the result of a turn whose final write failed, an
// error.
func notStored(res *engine.TurnResult) {
	res.Status, res.FinishReason, res.Error = engine.StatusError, engine.FinishError, errNotStoredText
}

// endFrames are the last frames of a turn's stream before [DONE]: its held
// finish, after an error chunk when the turn's final write failed (werr),
// which then also finishes with finishReason "error".
func endFrames(finish *engine.Event, res *engine.TurnResult, werr error) [][]byte {
	var evs []engine.Event
	if werr != nil {
		evs = append(evs, engine.Event{Type: engine.EventError, ErrorText: res.Error})
		end := engine.Event{Type: engine.EventFinish}
		if finish != nil {
			end = *finish
		}
		end.FinishReason = engine.FinishError
		finish = &end
	}
	if finish != nil {
		evs = append(evs, *finish)
	}
	frames := make([][]byte, 0, len(evs))
	for _, ev := range evs {
		if frame, err := uistream.EventFrame(ev); err == nil {
			frames = append(frames, frame)
		}
	}
	return frames
}

// responseCatcher keeps the engine's onChatResponse call so the gateway can
// fire it after persisting and releasing the lock, and the raw error of
// the last onChatError call: the one that ended the turn, when it failed
// (tool errors before it do not end a turn).
type responseCatcher struct {
	engine.NopHooks
	result *engine.ChatResponseResult
	err    error
}

func (c *responseCatcher) OnChatError(_ context.Context, e *engine.ChatErrorContext) error {
	c.err = e.Err
	return nil
}

func (c *responseCatcher) OnChatResponse(_ context.Context, r *engine.ChatResponseResult) {
	cp := *r
	c.result = &cp
}

// withoutResponse passes every hook but onChatResponse, which the gateway
// defers.
type withoutResponse struct{ engine.Hooks }

func (withoutResponse) OnChatResponse(context.Context, *engine.ChatResponseResult) {}
