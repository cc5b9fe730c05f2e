package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/tracing"
)

// saveRequest is the body of POST …/sessions/:id/messages: user messages
// (or one text), the custom body, and async for submitMessages.
type saveRequest struct {
	Messages []engine.UIMessage `json:"messages,omitempty"`
	Text     string             `json:"text,omitempty"`
	Body     map[string]any     `json:"body,omitempty"`
	Async    bool               `json:"async,omitempty"`
}

// turnResponse is the JSON result of a programmatic turn.
type turnResponse struct {
	RequestID    string           `json:"requestId"`
	Status       string           `json:"status"`
	FinishReason string           `json:"finishReason,omitempty"`
	Error        string           `json:"error,omitempty"`
	Message      engine.UIMessage `json:"message"`
	Output       json.RawMessage  `json:"output,omitempty"`
	Usage        *engine.Usage    `json:"usage,omitempty"`
	// PendingApprovals are the tool calls the turn holds for approval.
	PendingApprovals []pendingApproval `json:"pendingApprovals,omitempty"`
	// Replica names the replica that ran the turn, in a submission's
	// stored result (empty in a synchronous answer).
	Replica string `json:"replica,omitempty"`
}

func newTurnResponse(t *turn) *turnResponse {
	r := t.result
	resp := &turnResponse{RequestID: t.requestID, Status: t.status, FinishReason: r.FinishReason,
		Error: r.Error, Message: r.Message, Output: r.Output, PendingApprovals: pendingApprovals(r)}
	if t.status != StatusSkipped {
		resp.Usage = &r.Usage
	}
	if resp.Message.Parts == nil {
		resp.Message.Parts = []engine.UIPart{}
	}
	return resp
}

// decodeSaveRequest parses and checks a saveMessages body, returning the
// trusted user messages (text and file parts only, ids assigned), remote
// files fetched first when the agent's attachments say so (fetch.go).
func decodeSaveRequest(ctx context.Context, data []byte, maxMessages int, files *fileRules) (*saveRequest, error) {
	var req saveRequest
	if err := decodeStrictJSON(data, &req); err != nil {
		return nil, err
	}
	if req.Text != "" && len(req.Messages) > 0 {
		return nil, errBadRequest("set either messages or text, not both")
	}
	if req.Text != "" {
		req.Messages = []engine.UIMessage{{Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: req.Text}}}}
	}
	if len(req.Messages) == 0 {
		return nil, errField("messages", "at least one user message (or text) is required")
	}
	if len(req.Messages) > maxMessages {
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d messages is more than the limit of %d", len(req.Messages), maxMessages)
	}
	for i, m := range req.Messages {
		if err := files.fetchFiles(ctx, &m, "messages["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
		um, err := userMessage(m, "messages["+strconv.Itoa(i)+"]", files)
		if err != nil {
			return nil, err
		}
		req.Messages[i] = um
	}
	return &req, nil
}

// appendPlan appends msgs and runs a normal turn. When replaying a
// submission that a restart interrupted, messages already stored are
// skipped, and if all were, a partial assistant answer after them is
// continued rather than answered twice.
func appendPlan(msgs []engine.UIMessage, replay bool) func(ctx context.Context, tx *transcript) (*plan, error) {
	return func(ctx context.Context, tx *transcript) (*plan, error) {
		applied := 0
		for _, m := range msgs {
			if tx.index(m.ID) >= 0 {
				if replay {
					applied++
					continue
				}
				return nil, errorf(http.StatusConflict, CodeConflict, "message %q is already in the session", m.ID)
			}
			if err := tx.append(ctx, m); err != nil {
				return nil, err
			}
		}
		if l := tx.last(); replay && applied == len(msgs) && l != nil && l.Role == engine.RoleAssistant {
			return &plan{continuation: true, messageID: l.ID}, nil
		}
		return &plan{}, nil
	}
}

// saveMessages serves POST …/sessions/:id/messages: saveMessages (runs the
// turn and answers its result) or, with "async": true, submitMessages
// (stores the submission durably, then answers 202).
func (s *Server) saveMessages(c *gin.Context) error {
	ag, err := s.agentOf(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if !validID(id) {
		return errField("id", "is not a valid session id")
	}
	data, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeSaveRequest(c.Request.Context(), data, s.conf().Limits.MaxMessages, s.fileRules(ag))
	if err != nil {
		return err
	}
	if err := ag.checkBody(req.Body); err != nil {
		return err
	}
	if req.Async {
		return s.submit(c, ag, id, req)
	}
	return s.runAndRespond(c, &turnInput{
		agent: ag, principal: principal(c), sessionID: id, entry: engine.EntrySaveMessages,
		requestID: requestID(c), create: true, body: req.Body, setBody: true, bounded: true,
		prepare: appendPlan(req.Messages, false),
	})
}

// runAndRespond runs in's turn to its end and answers its result as JSON.
func (s *Server) runAndRespond(c *gin.Context, in *turnInput) error {
	t, err := s.begin(c.Request.Context(), in)
	if err != nil {
		return err
	}
	if err := t.wait(c.Request.Context()); err != nil {
		return err
	}
	if t.writeErr != nil {
		return t.writeErr
	}
	if ae := refusedError(t.err); ae != nil {
		return ae
	}
	c.JSON(http.StatusOK, newTurnResponse(t))
	return nil
}

// idempotencyHeader names the submitMessages deduplication key.
const idempotencyHeader = "Idempotency-Key"

// submissionResponse describes a submission.
type submissionResponse struct {
	SubmissionID string          `json:"submissionId"`
	Status       string          `json:"status"`
	Accepted     bool            `json:"accepted"`
	Attempts     int             `json:"attempts"`
	Result       json.RawMessage `json:"result,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
}

func newSubmissionResponse(sub *store.Submission, accepted bool) *submissionResponse {
	return &submissionResponse{SubmissionID: sub.ID, Status: sub.Status, Accepted: accepted, Attempts: sub.Attempts,
		Result: sub.Result, CreatedAt: sub.CreatedAt, UpdatedAt: sub.UpdatedAt}
}

// submit stores a submission before acknowledging it: 202 for a new one,
// 200 with accepted false for a repeated idempotency key.
func (s *Server) submit(c *gin.Context, ag *agent, sessionID string, req *saveRequest) error {
	key := c.GetHeader(idempotencyHeader)
	if len(key) > 256 {
		return errBadRequest("the %s header is longer than 256 characters", idempotencyHeader)
	}
	if s.closing.Load() {
		return errShuttingDown
	}
	p := principal(c)
	sess, err := s.store.GetSession(c.Request.Context(), p.Tenant, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case sess.Agent != ag.name:
		return errSessionNotFound
	}
	raw, err := json.Marshal(submissionRequest{Messages: req.Messages, Body: req.Body, Principal: p, Trace: tracing.Save(c.Request.Context())})
	if err != nil {
		return err
	}
	stored, existing, err := s.store.CreateSubmission(c.Request.Context(), &store.Submission{
		Tenant: p.Tenant, SessionID: sessionID, Agent: ag.name, IdempotencyKey: key, Request: raw,
	}, store.QueueLimits{
		PerSession: s.conf().Limits.MaxQueuedSubmissionsPerSession, PerTenant: s.conf().Limits.MaxQueuedSubmissionsPerTenant,
	})
	if err != nil {
		return err
	}
	if existing {
		c.JSON(http.StatusOK, newSubmissionResponse(stored, false))
		return nil
	}
	s.subs.notify()
	c.JSON(http.StatusAccepted, newSubmissionResponse(stored, true))
	return nil
}

// submissionStatus serves GET …/sessions/:id/submissions/:sid.
func (s *Server) submissionStatus(c *gin.Context) error {
	ag, sessionID, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	sub, err := s.store.GetSubmission(c.Request.Context(), principal(c).Tenant, sessionID, c.Param("sid"))
	if err != nil {
		return err
	}
	if sub.Agent != ag.name {
		return errSessionNotFound
	}
	c.JSON(http.StatusOK, newSubmissionResponse(sub, true))
	return nil
}

// ownedSession checks that the route's session exists, belongs to the
// caller's tenant and to the route's agent; anything else is a 404.
func (s *Server) ownedSession(c *gin.Context) (*agent, string, error) {
	ag, err := s.agentOf(c)
	if err != nil {
		return nil, "", err
	}
	id := c.Param("id")
	if !validID(id) {
		return nil, "", errSessionNotFound
	}
	sess, err := s.store.GetSession(c.Request.Context(), principal(c).Tenant, id)
	if err != nil {
		return nil, "", err
	}
	if sess.Agent != ag.name {
		return nil, "", errSessionNotFound
	}
	return ag, id, nil
}

// history serves GET …/sessions/:id/messages: the stored transcript.
func (s *Server) history(c *gin.Context) error {
	_, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	msgs, err := s.store.Messages(c.Request.Context(), principal(c).Tenant, id)
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []engine.UIMessage{}
	}
	c.JSON(http.StatusOK, gin.H{"sessionId": id, "messages": msgs})
	return nil
}

// continueRequest is the optional body of POST …/continue.
type continueRequest struct {
	Body map[string]any `json:"body,omitempty"`
}

// continueLastTurn serves POST …/sessions/:id/continue: a continuation of
// the last assistant message, or status "skipped" when the last message is
// not an assistant message.
func (s *Server) continueLastTurn(c *gin.Context) error {
	ag, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	var req continueRequest
	if err := decodeOptionalBody(c, &req); err != nil {
		return err
	}
	if req.Body != nil {
		if err := ag.checkBody(req.Body); err != nil {
			return err
		}
	}
	return s.runAndRespond(c, &turnInput{
		agent: ag, principal: principal(c), sessionID: id, entry: engine.EntryContinueLastTurn,
		requestID: requestID(c), body: req.Body, setBody: req.Body != nil, bounded: true,
		prepare: func(ctx context.Context, tx *transcript) (*plan, error) {
			l := tx.last()
			if l == nil || l.Role != engine.RoleAssistant {
				return &plan{skip: true}, nil
			}
			if awaitsApproval(l) {
				return s.decidedPlan(ctx, tx, l)
			}
			return &plan{continuation: true, messageID: l.ID}, nil
		},
	})
}

// cancel serves POST …/sessions/:id/cancel: the running turn ends aborted
// with its partial message persisted.
func (s *Server) cancel(c *gin.Context) error {
	_, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	cancelled := s.cancelTurn(principal(c).Tenant, id)
	if !cancelled && s.rep != nil {
		// The turn may run on another replica.
		if cancelled, err = s.rep.cancelRemote(c.Request.Context(), principal(c).Tenant, id, 0); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, gin.H{"cancelled": cancelled})
	return nil
}
