package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/uistream"
)

// A chat stream held for an approval. GET …/chat/{id}/stream on a session
// whose last message waits for approvals answers no 204 but a stream kept
// open until the turn resumes: a replay of the waiting message (start
// with its id, its parts, its tool-approval-request chunks, finish-step),
// an SSE keep-alive comment every limits.streamKeepAlive, a
// tool-approval-response chunk for each approval once it is decided (by
// an approver through POST /v1/approvals/{id} or the console, by the chat
// user, or by expiry), then the resumed turn's stream to its finish. The
// resumed turn is followed live when it runs on this replica (or on
// another, through the relay); one that ran and ended in between is
// replayed from the store: the chunks of what it added to the message.

// holdPoll is how often a held stream reads the message's approvals (a
// decision on another replica) and looks for its resumed turn.
const holdPoll = 250 * time.Millisecond

// keepAliveFrame is the SSE comment a held stream sends while it waits;
// the AI SDK client ignores comments (protocols.md A.3).
var keepAliveFrame = []byte(": keep-alive\n\n")

// turnWatch wakes the held streams of a session when one of its turns
// starts on this replica.
type turnWatch struct {
	ch chan struct{}
	n  int
}

// watchTurn registers a held stream of key: it returns the session's
// running turn (nil when none), a channel closed when the next one starts,
// and the stop that unregisters it.
func (s *Server) watchTurn(key string) (*turn, <-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.started[key]
	if w == nil {
		w = &turnWatch{ch: make(chan struct{})}
		s.started[key] = w
	}
	w.n++
	return s.active[key], w.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.n--; w.n == 0 && s.started[key] == w {
			delete(s.started, key)
		}
	}
}

// wakeHeld wakes the held streams of key; it runs under s.mu as a turn
// of key becomes active.
func (s *Server) wakeHeld(key string) {
	if w := s.started[key]; w != nil {
		close(w.ch)
		delete(s.started, key)
	}
}

// approvalDescriptor is the approvalDescriptor of a role-gated
// tool-approval-request chunk: it tells the chat client that may not
// answer it so (the AI SDK keeps it as the part's approval.descriptor).
type approvalDescriptor struct {
	// Approvers are the roles that may decide the call.
	Approvers []string `json:"approvers"`
	// ChatUserMayAnswer is whether this chat client's principal may
	// answer; when false its answer is ignored (an error chunk says so).
	ChatUserMayAnswer bool `json:"chatUserMayAnswer"`
	// Why says why it may not.
	Why string `json:"why,omitempty"`
	// DecideAt is the API an approver decides the call through.
	DecideAt string `json:"decideAt"`
}

// describeApproval sets the approvalDescriptor of ev, a
// tool-approval-request the principal p's stream carries, when only
// holders of roles may decide it; a for the stored approval, or nil in
// the turn that asks it (p asked it then).
func describeApproval(ev *engine.Event, p engine.Principal, a *store.Approval) {
	if a == nil {
		prin, _ := json.Marshal(p)
		a = &store.Approval{Approvers: ev.Approvers, Principal: prin}
	}
	if len(a.Approvers) == 0 {
		return
	}
	why := mayDecide(p, a)
	ev.ApprovalDescriptor, _ = json.Marshal(approvalDescriptor{Approvers: a.Approvers, ChatUserMayAnswer: why == "", Why: why,
		DecideAt: "POST /v1/approvals/" + ev.ApprovalID})
}

// heldStream is the state of one held stream.
type heldStream struct {
	s   *Server
	c   *gin.Context
	p   engine.Principal
	id  string
	key string
	// sent is the message as the stream has shown it; step is whether
	// its last step is open (no finish-step sent yet).
	sent engine.UIMessage
	step bool
	// answered are the approvals whose response the stream sent.
	answered map[string]bool
}

// holdStream answers GET …/chat/{id}/stream for a session whose last
// message waits for approvals, as a held stream; it reports false, having
// written nothing, when the session waits for none.
func (s *Server) holdStream(c *gin.Context, p engine.Principal, id string) (bool, error) {
	ctx := c.Request.Context()
	h := &heldStream{s: s, c: c, p: p, id: id, key: sessionKey(p.Tenant, id), answered: map[string]bool{}}
	// Watched before the store is read: a turn that starts after the read
	// wakes the stream.
	t, wake, stop := s.watchTurn(h.key)
	defer func() { stop() }()
	if t != nil {
		s.stream(c, t.buf)
		return true, nil
	}
	msg, rows, err := h.waiting(ctx)
	if err != nil || msg == nil {
		return false, err
	}
	s.metrics.ActiveStreams.Inc()
	defer s.metrics.ActiveStreams.Dec()
	uistream.SetHeaders(c.Writer.Header())
	c.Status(http.StatusOK)
	h.sent = engine.UIMessage{ID: msg.ID, Role: engine.RoleAssistant}
	chunks := append([]any{engine.Event{Type: engine.EventStart, MessageID: msg.ID}}, events(h.added(*msg, rows))...)
	chunks = append(chunks, events(h.finishStep())...)
	if !h.write(append(chunks, h.responses(rows)...)...) {
		return true, nil
	}
	keep := time.NewTicker(s.conf().Limits.StreamKeepAlive)
	defer keep.Stop()
	poll := time.NewTicker(holdPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil // the client left; the turn is unaffected
		case <-keep.C:
			if !h.flushed(keepAliveFrame) {
				return true, nil
			}
			continue
		case <-wake:
			stop()
			t, wake, stop = s.watchTurn(h.key)
		case <-poll.C:
		}
		if t != nil && t.messageID == msg.ID {
			// The resumed turn: its decisions first, then its stream.
			if rows, err := h.approvals(ctx, msg.ID); err == nil && !h.write(h.responses(rows)...) {
				return true, nil
			}
			out := h.sink()
			_ = t.buf.Walk(ctx, 0, func(frames [][]byte, _ bool) error {
				if err := out.write(bytes.Join(frames, nil)); err != nil {
					return err
				}
				out.flush()
				return nil
			})
			return true, nil
		}
		if h.poll(ctx) {
			return true, nil
		}
	}
}

// poll reads the message's approvals and, once every one is decided,
// looks for the resumed turn on the other replicas and in the store. It
// reports whether the stream has ended.
func (h *heldStream) poll(ctx context.Context) bool {
	s := h.s
	if s.closing.Load() {
		// Shutting down: the client comes back to another gateway.
		return h.end(nil, engine.FinishInterrupted)
	}
	rows, err := h.approvals(ctx, h.sent.ID)
	if err != nil {
		return false // the store may be back at the next poll
	}
	if !h.write(h.responses(rows)...) {
		return true
	}
	for _, a := range rows {
		if a.State == store.ApprovalPending {
			return false
		}
	}
	if s.rep != nil {
		// The resumed turn may run on another replica: its stream is relayed.
		if ok, err := s.rep.resume(ctx, h.sink(), h.p.Tenant, h.id, nil); ok || err != nil {
			return true
		}
	}
	_, msgs, err := s.store.Transcript(ctx, h.p.Tenant, h.id)
	if err != nil {
		return false
	}
	i := len(msgs) - 1
	for i >= 0 && msgs[i].ID != h.sent.ID {
		i--
	}
	switch {
	case i < 0 || i != len(msgs)-1:
		// The session moved on (a new user message superseded the
		// approvals): nothing resumes this message.
		return h.end(nil, engine.FinishInterrupted)
	case awaitsApproval(&msgs[i]) && h.sameParts(&msgs[i]):
		return false // decided; its resume is queued
	}
	// The resumed turn ran and ended between two polls: what it added,
	// from the store.
	stored := msgs[i]
	rows, _ = h.approvals(ctx, stored.ID)
	evs := h.added(stored, rows)
	if awaitsApproval(&stored) {
		// It asks for approvals again: the stream holds on.
		return !h.write(append(events(append(evs, h.finishStep()...)), h.responses(rows)...)...)
	}
	return h.end(evs, engine.FinishStop)
}

// sink is where the resumed turn's stream goes: the response, without
// the turn's start chunk when it only names the message the stream
// started with (the stream is one response to the client).
func (h *heldStream) sink() *resumedSink {
	start, _ := uistream.EventFrame(engine.Event{Type: engine.EventStart, MessageID: h.sent.ID})
	return &resumedSink{httpSink: httpSink{h.c.Writer}, start: start}
}

// resumedSink is a held stream's sink for its resumed turn's frames.
type resumedSink struct {
	httpSink
	// start is the start frame to drop, until the first write.
	start []byte
}

func (r *resumedSink) write(frames []byte) error {
	if r.start != nil && len(frames) > 0 {
		frames = bytes.TrimPrefix(frames, r.start)
		r.start = nil
	}
	return r.httpSink.write(frames)
}

// finishStep closes the open step, if any.
func (h *heldStream) finishStep() []engine.Event {
	if !h.step {
		return nil
	}
	h.step = false
	return []engine.Event{{Type: engine.EventFinishStep}}
}

// end ends the stream after evs with finish and reason: "stop" for a
// message that no longer waits, "interrupted" for a stream cut before its
// turn resumed, which keeps the AI SDK client from resubmitting its parts
// (protocols.md A.11). It reports true.
func (h *heldStream) end(evs []engine.Event, reason string) bool {
	evs = append(append(evs, h.finishStep()...), engine.Event{Type: engine.EventFinish, FinishReason: reason})
	if h.write(events(evs)...) {
		h.flushed(uistream.Done)
	}
	return true
}

// waiting returns the session's last message and its approvals when it
// waits for approval, else nil.
func (h *heldStream) waiting(ctx context.Context) (*engine.UIMessage, map[string]*store.Approval, error) {
	_, msgs, err := h.s.store.Transcript(ctx, h.p.Tenant, h.id)
	if err != nil || len(msgs) == 0 || !awaitsApproval(&msgs[len(msgs)-1]) {
		return nil, nil, err
	}
	last := &msgs[len(msgs)-1]
	rows, err := h.approvals(ctx, last.ID)
	if err != nil || len(rows) == 0 {
		// Approvals never stored cannot be decided: nothing will resume.
		return nil, nil, err
	}
	return last, rows, nil
}

// approvals returns the stored approvals of message id, by approval id.
func (h *heldStream) approvals(ctx context.Context, id string) (map[string]*store.Approval, error) {
	return h.s.messageApprovals(ctx, &transcript{tenant: h.p.Tenant, session: h.id}, &engine.UIMessage{ID: id})
}

// sameParts reports whether m's parts are those the stream has shown.
func (h *heldStream) sameParts(m *engine.UIMessage) bool {
	a, _ := json.Marshal(m.Parts)
	b, _ := json.Marshal(h.sent.Parts)
	return string(a) == string(b)
}

// responses are the tool-approval-response chunks of the decided
// approvals the stream has not answered yet.
func (h *heldStream) responses(rows map[string]*store.Approval) []any {
	var evs []any
	for _, p := range h.sent.Parts {
		if !p.IsTool() || p.Approval == nil {
			continue
		}
		a := rows[p.Approval.ID]
		if a == nil || a.State == store.ApprovalPending || h.answered[a.ID] {
			continue
		}
		h.answered[a.ID] = true
		evs = append(evs, newApprovalResponseChunk(a))
	}
	return evs
}

// added returns the chunks of what m adds to the message the stream has
// shown, and takes m as shown: the new state of a tool part shown before
// (an output, an error, a denial), then each new part as the engine
// streamed it, tool-approval-request chunks described for the stream's
// principal.
func (h *heldStream) added(m engine.UIMessage, rows map[string]*store.Approval) []engine.Event {
	var evs []engine.Event
	for i, p := range h.sent.Parts {
		if i < len(m.Parts) && p.IsTool() && m.Parts[i].State != p.State {
			evs = append(evs, toolStateEvents(m.Parts[i], nil)...)
		}
	}
	describe := func(ev *engine.Event) {
		if a := rows[ev.ApprovalID]; a != nil {
			describeApproval(ev, h.p, a)
		}
	}
	for _, p := range m.Parts[min(len(h.sent.Parts), len(m.Parts)):] {
		switch {
		case p.Type == engine.PartStepStart:
			evs = append(evs, h.finishStep()...)
			h.step = true
			evs = append(evs, engine.Event{Type: engine.EventStartStep})
		case p.Type == engine.PartText || p.Type == engine.PartReasoning:
			start, delta, end := engine.EventTextStart, engine.EventTextDelta, engine.EventTextEnd
			if p.Type == engine.PartReasoning {
				start, delta, end = engine.EventReasoningStart, engine.EventReasoningDelta, engine.EventReasoningEnd
			}
			id := newID("txt_")
			evs = append(evs, engine.Event{Type: start, ID: id}, engine.Event{Type: delta, ID: id, Delta: p.Text}, engine.Event{Type: end, ID: id})
		case p.IsTool():
			evs = append(evs, engine.Event{Type: engine.EventToolInputAvailable, ToolCallID: p.ToolCallID, ToolName: p.ToolPartName(),
				Input: orNull(p.Input), Dynamic: p.Type == engine.PartDynamicTool})
			evs = append(evs, toolStateEvents(p, describe)...)
		}
	}
	h.sent = m
	return evs
}

// toolStateEvents are the chunks that put a tool part in p's state after
// tool-input-available; describe, when not nil, describes a
// tool-approval-request.
func toolStateEvents(p engine.UIPart, describe func(*engine.Event)) []engine.Event {
	switch p.State {
	case engine.ToolStateOutputAvailable:
		return []engine.Event{{Type: engine.EventToolOutputAvailable, ToolCallID: p.ToolCallID, Output: orNull(p.Output), Dynamic: p.Type == engine.PartDynamicTool}}
	case engine.ToolStateOutputError:
		return []engine.Event{{Type: engine.EventToolOutputError, ToolCallID: p.ToolCallID, ErrorText: p.ErrorText, Dynamic: p.Type == engine.PartDynamicTool}}
	case engine.ToolStateOutputDenied:
		return []engine.Event{{Type: engine.EventToolOutputDenied, ToolCallID: p.ToolCallID}}
	case engine.ToolStateApprovalRequested:
		if p.Approval == nil {
			return nil
		}
		ev := engine.Event{Type: engine.EventToolApprovalRequest, ApprovalID: p.Approval.ID, ToolCallID: p.ToolCallID, Reason: p.Approval.RequestReason}
		if describe != nil {
			describe(&ev)
		}
		return []engine.Event{ev}
	}
	return nil
}

// approvalResponseChunk is the tool-approval-response chunk of a decided
// approval; the engine never sends one, so it has no engine.Event type.
type approvalResponseChunk struct {
	Type       string `json:"type"`
	ApprovalID string `json:"approvalId"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

func newApprovalResponseChunk(a *store.Approval) approvalResponseChunk {
	reason := a.Reason
	if a.State == store.ApprovalExpired && reason == "" {
		reason = store.ApprovalExpired
	}
	return approvalResponseChunk{Type: "tool-approval-response", ApprovalID: a.ID, Approved: a.State == store.ApprovalApproved, Reason: reason}
}

// orNull is v, or JSON null when it is empty.
func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// write sends chunks (engine events and approval responses) as UI message
// stream chunks and flushes them; it reports false when the client went
// away.
func (h *heldStream) write(chunks ...any) bool {
	var frames []byte
	for _, ch := range chunks {
		f, err := uistream.Frame(ch)
		if err != nil {
			h.s.log.Error("encoding a held stream's chunk", "err", err)
			continue
		}
		frames = append(frames, f...)
	}
	return h.flushed(frames)
}

// events boxes evs for write.
func events(evs []engine.Event) []any {
	out := make([]any, len(evs))
	for i, ev := range evs {
		out[i] = ev
	}
	return out
}

// flushed writes frames and flushes them (a response with nothing
// written yet gets its status and headers); it reports false when the
// client went away.
func (h *heldStream) flushed(frames []byte) bool {
	if _, err := h.c.Writer.Write(frames); err != nil {
		return false
	}
	h.c.Writer.Flush()
	return true
}
