package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/uistream"
)

// Chat triggers, as DefaultChatTransport sends them.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// chatRequest is DefaultChatTransport's body: {id, messages, trigger,
// messageId?, ...extra}. Extra keys are the turn's custom body.
type chatRequest struct {
	ID        string
	Messages  []engine.UIMessage
	Trigger   string
	MessageID string
	Body      map[string]any
	// files checks the user message's file parts (set by startChat).
	files *fileRules
}

// decodeChatRequest parses and checks a chat request body. It is the
// parser of untrusted chat input (fuzzed).
func decodeChatRequest(data []byte, maxMessages int) (*chatRequest, error) {
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' {
		if !json.Valid(data) {
			return nil, jsonError(json.Unmarshal(data, new(any)))
		}
		return nil, errBadRequest("request body must be a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, jsonError(err)
	}
	req := &chatRequest{Trigger: triggerSubmit}
	for key, raw := range fields {
		var err error
		switch key {
		case "id":
			err = decodeField(raw, key, &req.ID)
		case "messages":
			err = decodeField(raw, key, &req.Messages)
		case "trigger":
			err = decodeField(raw, key, &req.Trigger)
		case "messageId":
			if string(raw) != "null" {
				err = decodeField(raw, key, &req.MessageID)
			}
		default:
			var v any
			if err = decodeField(raw, key, &v); err == nil {
				if req.Body == nil {
					req.Body = map[string]any{}
				}
				req.Body[key] = v
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := req.validate(maxMessages); err != nil {
		return nil, err
	}
	return req, nil
}

// validate checks a decoded chat request, from a POST body or a WebSocket
// send frame.
func (req *chatRequest) validate(maxMessages int) error {
	switch {
	case req.ID == "":
		return errField("id", "the chat id is required")
	case !validID(req.ID):
		return errField("id", "must be 1-128 characters of letters, digits and _ . : @ -")
	case len(req.Messages) == 0:
		return errField("messages", "at least one message is required")
	case len(req.Messages) > maxMessages:
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d messages is more than the limit of %d", len(req.Messages), maxMessages)
	case req.Trigger != triggerSubmit && req.Trigger != triggerRegenerate:
		return errField("trigger", "must be %q or %q, not %q", triggerSubmit, triggerRegenerate, req.Trigger)
	case req.MessageID != "" && !validID(req.MessageID):
		return errField("messageId", "is not a valid message id")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case engine.RoleUser, engine.RoleAssistant, engine.RoleSystem:
		default:
			return errBadRequest("field messages[%d].role: must be user, assistant or system, not %q", i, m.Role)
		}
	}
	return nil
}

// userMessage returns the trusted form of a client's user message: its id
// (or a new one), its non-empty text parts and its file parts (checked by
// files), in order; every other part is dropped.
func userMessage(m engine.UIMessage, field string, files *fileRules) (engine.UIMessage, error) {
	if m.Role != engine.RoleUser {
		return engine.UIMessage{}, errField(field+".role", "must be user")
	}
	id := m.ID
	if id == "" {
		id = newID("msg_")
	} else if !validID(id) {
		return engine.UIMessage{}, errField(field+".id", "is not a valid message id")
	}
	out := engine.UIMessage{ID: id, Role: engine.RoleUser, Parts: []engine.UIPart{}}
	nfiles := 0
	for j, p := range m.Parts {
		switch p.Type {
		case engine.PartText:
			if p.Text != "" {
				out.Parts = append(out.Parts, engine.UIPart{Type: engine.PartText, Text: p.Text})
			}
		case engine.PartFile:
			fp, err := files.filePart(p, fmt.Sprintf("%s.parts[%d]", field, j))
			if err != nil {
				return engine.UIMessage{}, err
			}
			out.Parts = append(out.Parts, fp)
			nfiles++
		}
	}
	if err := files.countFiles(nfiles, field+".parts"); err != nil {
		return engine.UIMessage{}, err
	}
	if len(out.Parts) == 0 {
		return engine.UIMessage{}, errField(field, "a user message needs at least one non-empty text part or a file")
	}
	return out, nil
}

// chatPlan applies a chat request to the stored transcript, taking from it
// only what the gateway accepts (see the package doc), and returns the plan.
func chatPlan(ctx context.Context, req *chatRequest, tx *transcript) (*plan, error) {
	last := req.Messages[len(req.Messages)-1]
	if req.Trigger == triggerRegenerate {
		return regeneratePlan(ctx, req, tx)
	}
	if req.MessageID != "" {
		i := tx.index(req.MessageID)
		switch {
		case i < 0:
			return nil, errField("messageId", "names no message of this session")
		case tx.messages[i].Role == engine.RoleUser:
			return editPlan(ctx, req, tx, i)
		}
	}
	switch last.Role {
	case engine.RoleAssistant:
		if tx.answer != nil && (awaitsApproval(tx.last()) || answersApproval(last)) {
			return tx.answer(ctx, last, tx)
		}
		return toolResultPlan(ctx, last, tx)
	case engine.RoleUser:
	default:
		return nil, errBadRequest("the last message must be a user message or the assistant message awaiting tool outputs")
	}
	if i := tx.index(last.ID); i >= 0 && last.ID != "" {
		if i == len(tx.messages)-1 {
			return &plan{}, nil // a retry of an unanswered message: run it again
		}
		return nil, errorf(http.StatusConflict, CodeConflict, "message %q is already in the session and answered", last.ID)
	}
	m, err := userMessage(last, lastField(req), req.files)
	if err != nil {
		return nil, err
	}
	if err := tx.append(ctx, m); err != nil {
		return nil, err
	}
	return &plan{}, nil
}

// lastField is the field path of the request's last message.
func lastField(req *chatRequest) string { return fmt.Sprintf("messages[%d]", len(req.Messages)-1) }

// editPlan replaces the text of stored user message i with the request's
// and drops everything after it.
func editPlan(ctx context.Context, req *chatRequest, tx *transcript, i int) (*plan, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.ID != req.MessageID {
		return nil, errField("messageId", "an edit's last message must be the edited user message")
	}
	m, err := userMessage(last, lastField(req), req.files)
	if err != nil {
		return nil, err
	}
	if err := tx.truncateAfter(ctx, m.ID, false); err != nil {
		return nil, err
	}
	if err := tx.upsert(ctx, m); err != nil {
		return nil, err
	}
	return &plan{}, nil
}

// regeneratePlan drops the assistant message being regenerated (the given
// one, or the last) and everything after it, then reruns from the user
// message before it.
func regeneratePlan(ctx context.Context, req *chatRequest, tx *transcript) (*plan, error) {
	id := req.MessageID
	if id == "" {
		if l := tx.last(); l != nil && l.Role == engine.RoleAssistant {
			id = l.ID
		}
	}
	if id != "" {
		i := tx.index(id)
		if i < 0 {
			return nil, errField("messageId", "names no message of this session")
		}
		if err := tx.truncateAfter(ctx, id, tx.messages[i].Role == engine.RoleAssistant); err != nil {
			return nil, err
		}
	}
	if l := tx.last(); l == nil || l.Role != engine.RoleUser {
		return nil, errBadRequest("nothing to regenerate: the session has no user message to answer")
	}
	return &plan{}, nil
}

// toolResultPlan copies the outputs of the client tool calls the stored
// last assistant message is waiting for, and nothing else, then continues
// that message. It takes them only once every pending call has one (the AI
// SDK client sends them together), so no client output is stored before the
// continuation turn has run the toolResult policy over it
// (TurnRequest.ClientToolResults). A request that carries no such output,
// or not all of them, starts no turn: it is answered by the A.8 guard.
func toolResultPlan(ctx context.Context, sent engine.UIMessage, tx *transcript) (*plan, error) {
	stored := tx.last()
	if stored == nil || stored.Role != engine.RoleAssistant || stored.ID != sent.ID {
		return &plan{skip: true, skipMessageID: sent.ID}, nil
	}
	pending := map[string]int{}
	for i, p := range stored.Parts {
		if p.IsTool() && p.State == engine.ToolStateInputAvailable {
			pending[p.ToolCallID] = i
		}
	}
	msg := *stored
	msg.Parts = append([]engine.UIPart(nil), stored.Parts...)
	var filled []string
	for _, p := range sent.Parts {
		i, ok := pending[p.ToolCallID]
		if !ok || !p.IsTool() {
			continue
		}
		switch p.State {
		case engine.ToolStateOutputAvailable:
			out := p.Output
			if len(out) == 0 {
				out = json.RawMessage("null")
			}
			msg.Parts[i].State, msg.Parts[i].Output, msg.Parts[i].ErrorText = p.State, out, ""
		case engine.ToolStateOutputError:
			msg.Parts[i].State, msg.Parts[i].Output, msg.Parts[i].ErrorText = p.State, nil, p.ErrorText
		default:
			continue
		}
		delete(pending, p.ToolCallID)
		filled = append(filled, p.ToolCallID)
	}
	if len(filled) == 0 || len(pending) > 0 {
		return &plan{skip: true, skipMessageID: stored.ID}, nil
	}
	// The transcript the turn reads carries the outputs; the store gets
	// them with the turn's result, after the toolResult policy.
	tx.replaceLast(msg)
	return &plan{continuation: true, messageID: msg.ID, entry: engine.EntryToolResult, clientResults: filled}, nil
}

// chat serves POST /v1/agents/:agent/chat: the UI message stream.
func (s *Server) chat(c *gin.Context) error {
	ag, err := s.agentOf(c)
	if err != nil {
		return err
	}
	data, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeChatRequest(data, s.conf().Limits.MaxMessages)
	if err != nil {
		return err
	}
	t, err := s.startChat(c.Request.Context(), ag, principal(c), requestID(c), req)
	if err != nil {
		return err
	}
	s.stream(c, t.buf)
	return nil
}

// startChat checks a chat request's custom body and admits its turn: the
// one path of POST chat and of the WebSocket send frame.
func (s *Server) startChat(ctx context.Context, ag *agent, p engine.Principal, requestID string, req *chatRequest) (*turn, error) {
	if err := ag.checkBody(req.Body); err != nil {
		return nil, err
	}
	req.files = s.fileRules(ag)
	if err := req.files.fetchFiles(ctx, &req.Messages[len(req.Messages)-1], lastField(req)); err != nil {
		return nil, err
	}
	return s.begin(ctx, &turnInput{
		agent: ag, principal: p, sessionID: req.ID, entry: engine.EntryChat,
		requestID: requestID, create: true, body: req.Body, setBody: true, bounded: true,
		prepare: func(ctx context.Context, tx *transcript) (*plan, error) { return chatPlan(ctx, req, tx) },
	})
}

// stream writes buf as a UI message stream response, following it live.
// A client that goes away stops only its own copy of the stream.
func (s *Server) stream(c *gin.Context, buf *uistream.Buffer) {
	s.metrics.ActiveStreams.Inc()
	defer s.metrics.ActiveStreams.Dec()
	uistream.SetHeaders(c.Writer.Header())
	c.Status(http.StatusOK)
	// The headers go out with the first frames, in one write: the engine
	// hands over its start event after its setup hooks (beforeTurn, and the
	// toolResult hooks of a continuation's client outputs) and before it
	// waits for the model.
	c.Writer.WriteHeaderNow()
	_ = buf.Follow(c.Request.Context(), c.Writer)
}

// resumeStream serves GET /v1/agents/:agent/chat/:id/stream: a replay of
// the in-flight response from its first chunk; a stream held open while
// the session's turn waits for an approver (approvals_hold.go); or 204
// when no turn runs nor waits.
func (s *Server) resumeStream(c *gin.Context) error {
	ag, err := s.agentOf(c)
	if err != nil {
		return err
	}
	t, err := s.activeTurn(c.Request.Context(), ag, principal(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	if t == nil && s.rep != nil {
		// The turn may run on another replica: its stream is relayed.
		if ok, err := s.rep.resume(c.Request.Context(), httpSink{c.Writer}, principal(c).Tenant, c.Param("id"), nil); ok || err != nil {
			return err
		}
	}
	if t == nil {
		if held, err := s.holdStream(c, principal(c), c.Param("id")); held || err != nil {
			return err
		}
		c.Status(http.StatusNoContent)
		return nil
	}
	s.stream(c, t.buf)
	return nil
}

// httpSink writes a stream relayed from another replica as the response of
// GET …/chat/:id/stream: the UI message stream's status and headers go out
// with its first frames.
type httpSink struct{ w gin.ResponseWriter }

func (h httpSink) write(frames []byte) error {
	if !h.w.Written() {
		uistream.SetHeaders(h.w.Header())
		h.w.WriteHeader(http.StatusOK)
	}
	_, err := h.w.Write(frames)
	return err
}

func (h httpSink) flush() { h.w.Flush() }

// activeTurn returns the in-flight turn of tenant's session id, or nil when
// none runs. A session that is missing, another tenant's or another
// agent's is errSessionNotFound.
func (s *Server) activeTurn(ctx context.Context, ag *agent, tenant, id string) (*turn, error) {
	if !validID(id) {
		return nil, errSessionNotFound
	}
	sess, err := s.store.GetSession(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sess.Agent != ag.name {
		return nil, errSessionNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[sessionKey(tenant, id)], nil
}
