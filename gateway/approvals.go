package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/notify"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/tracing"
	"github.com/turngate/turngate/policy/opa"
)

// Human approval of tool calls (the Rego approval decision). A turn that
// holds calls for approval ends with them pending; the gateway stores each
// as a store.Approval (durable, tenant-scoped, expiring after
// limits.approvalExpiry) before the turn's lock is released, so no answer
// can race its request. An approval is decided once: by the chat client
// answering in the next chat request (an approval-responded tool part),
// by POST /v1/approvals/{id}, or by expiry. When every approval of the
// message is decided the turn continues: at once in the chat request that
// decided the last one, otherwise as a durable submission (the submissions
// worker), so a decision through the API or an expiry resumes the turn on
// its own. That submission is queued in the transaction that stores the
// decision (store.Resume): a crash leaves both stored or neither, never an
// answered turn that nothing resumes. The stored transcript stays
// authoritative: the client's parts only carry answers, which count for an
// approval the gateway issued, still pending, for that tool call of this
// session, and (when its rule names approver roles) from a principal
// holding one of them. Every other answer is ignored, audited and counted.

// Approval outcomes in the audit log and the metrics.
const (
	approvalRequested = "requested"
	approvalIgnored   = "ignored"
)

// approvalResumeKey is the idempotency key of the submission that resumes
// the turn whose request asked the approvals: one resume per round.
func approvalResumeKey(requestID string) string { return "approvals:" + requestID }

// recordApprovals stores the turn's pending approvals and audits them. It
// runs before the turn's message is stored and its lock released.
func (s *Server) recordApprovals(ctx context.Context, in *turnInput, res *engine.TurnResult) {
	if len(res.PendingApprovals) == 0 {
		return
	}
	now := time.Now().UTC()
	prin, _ := json.Marshal(in.principal)
	rows := make([]store.Approval, len(res.PendingApprovals))
	for i, p := range res.PendingApprovals {
		reasons, _ := json.Marshal(p.Reasons)
		rows[i] = store.Approval{
			ID: p.ApprovalID, Tenant: in.principal.Tenant, SessionID: in.sessionID, Agent: in.agent.name,
			RequestID: in.requestID, MessageID: res.Message.ID, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
			Input: p.Input, Reasons: reasons, Approvers: p.Approvers(), Principal: prin,
			RequestedAt: now, ExpiresAt: now.Add(s.conf().Limits.ApprovalExpiry),
		}
	}
	if in.ephemeral {
		for i := range rows {
			s.auditApproval(&rows[i], approvalIgnored, in.principal.Subject, "the OpenAI-compatible endpoint keeps no session to resume")
		}
		return
	}
	if err := s.store.CreateApprovals(ctx, rows); err != nil {
		// The calls then stay unanswerable; a later answer finds no
		// approval and the turn's continuation denies them.
		s.log.Error("storing approvals", "requestId", in.requestID, "session", in.sessionID, "err", err)
		return
	}
	for i := range rows {
		s.auditApproval(&rows[i], approvalRequested, "", "")
	}
}

// auditApproval writes an approval event to the audit log and the metrics.
// Requests, decisions and expiries are also queued for the approval
// webhooks (gateway/notify).
func (s *Server) auditApproval(a *store.Approval, outcome, by, why string) {
	s.metrics.Approvals.WithLabelValues(s.metrics.ToolLabel(a.ToolName), outcome).Inc()
	s.audit.Approval(approvalRecord(a, outcome, by, why))
	typ := map[string]string{approvalRequested: notify.TypeRequested, store.ApprovalApproved: notify.TypeDecided,
		store.ApprovalDenied: notify.TypeDecided, store.ApprovalExpired: notify.TypeExpired}[outcome]
	if typ == "" {
		return
	}
	ev := notify.Event{Type: typ, Time: time.Now().UTC(), Approval: notify.Approval{
		ID: a.ID, Tenant: a.Tenant, Agent: a.Agent, SessionID: a.SessionID, RequestID: a.RequestID,
		ToolCallID: a.ToolCallID, ToolName: a.ToolName, Approvers: a.Approvers, State: outcome, DecidedBy: a.DecidedBy,
		Reason: a.Reason, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt}}
	if outcome == approvalRequested {
		ev.Approval.State = store.ApprovalPending
	} else if !a.DecidedAt.IsZero() {
		ev.Approval.DecidedAt = &a.DecidedAt
	}
	s.notify.Approval(ev)
}

// approvalRecord is the audit record of an approval event.
func approvalRecord(a *store.Approval, outcome, by, why string) *audit.Approval {
	rec := &audit.Approval{
		Time: time.Now().UTC(), Outcome: outcome, ApprovalID: a.ID, Tenant: a.Tenant, SessionID: a.SessionID,
		Agent: a.Agent, RequestID: a.RequestID, ToolCallID: a.ToolCallID, ToolName: a.ToolName,
		Approvers: a.Approvers, By: by, Why: why,
	}
	switch outcome {
	case approvalRequested:
		rec.Input, rec.Reasons, rec.ExpiresAt = a.Input, a.Reasons, &a.ExpiresAt
	case approvalIgnored:
	default:
		rec.Reason, rec.DecidedAt = a.Reason, &a.DecidedAt
	}
	return rec
}

// awaitsApproval reports whether m has tool parts awaiting approval.
func awaitsApproval(m *engine.UIMessage) bool {
	return m != nil && slices.ContainsFunc(m.Parts, func(p engine.UIPart) bool {
		return p.IsTool() && p.State == engine.ToolStateApprovalRequested && p.Approval != nil
	})
}

// answersApproval reports whether m carries approval answers.
func answersApproval(m engine.UIMessage) bool {
	return slices.ContainsFunc(m.Parts, isAnswer)
}

// isAnswer reports whether p is a tool part in approval-responded.
func isAnswer(p engine.UIPart) bool {
	return p.IsTool() && p.State == engine.ToolStateApprovalResponded && p.Approval != nil && p.Approval.Approved != nil
}

// answerPlan applies the chat client's answers in sent (its copy of the
// stored last message) and continues the message when every approval of
// it is decided; otherwise, and for answers to a message that is not the
// session's last, it answers with the guard (nothing runs).
func (s *Server) answerPlan(ctx context.Context, sent engine.UIMessage, tx *transcript) (*plan, error) {
	stored := tx.last()
	if stored == nil || stored.Role != engine.RoleAssistant || stored.ID != sent.ID {
		stored = &engine.UIMessage{ID: sent.ID}
	}
	rows, err := s.messageApprovals(ctx, tx, stored)
	if err != nil {
		return nil, err
	}
	var ignored *ignoredAnswer
	for _, p := range sent.Parts {
		if !isAnswer(p) {
			continue
		}
		if a, why := s.answer(ctx, tx, rows, p); a != nil {
			if ignored == nil {
				ignored = &ignoredAnswer{a: a, why: why, tools: map[string]int{}}
			} else {
				ignored.more++
			}
			ignored.tools[s.metrics.ToolLabel(a.ToolName)]++
		}
	}
	if ignored != nil {
		s.auditIgnored(ignored, tx.principal.Subject)
	}
	p, err := s.decidedPlan(ctx, tx, stored)
	// An answer that could not count (a principal who may not decide, an
	// approval that does not exist) is told so; a repeat of an answer
	// already applied (a client's retry) is not an error.
	if err == nil && p.skip && ignored != nil && !strings.HasPrefix(ignored.why, approvalAlready) {
		p.skipError = "approval answer ignored: " + ignored.why
	}
	if err != nil || p.skip || !slices.ContainsFunc(stored.Parts, func(p engine.UIPart) bool {
		return p.IsTool() && p.State == engine.ToolStateInputAvailable
	}) {
		return p, err
	}
	// The step also called client tools: their outputs come with the
	// answers, and the continuation needs both.
	cp, err := toolResultPlan(ctx, sent, tx)
	if err != nil || cp.skip {
		return cp, err
	}
	p.clientResults = cp.clientResults
	return p, nil
}

// messageApprovals returns the stored approvals of message m by id.
func (s *Server) messageApprovals(ctx context.Context, tx *transcript, m *engine.UIMessage) (map[string]*store.Approval, error) {
	list, err := s.store.ListApprovals(ctx, tx.tenant, store.ApprovalFilter{SessionID: tx.session})
	if err != nil {
		return nil, err
	}
	rows := map[string]*store.Approval{}
	for i := range list {
		if list[i].MessageID == m.ID {
			rows[list[i].ID] = &list[i]
		}
	}
	return rows, nil
}

// ignoredAnswer is the first answer of a chat request that did not count,
// and how many more of its answers did not: a request records one
// ignored answer however many parts it sends (a client may send
// thousands, for approval ids the gateway never issued).
type ignoredAnswer struct {
	a    *store.Approval
	why  string
	more int
	// tools counts the ignored answers by tool label.
	tools map[string]int
}

// auditIgnored records a request's ignored answers as one record, each
// counted in the metrics under its tool label.
func (s *Server) auditIgnored(ig *ignoredAnswer, by string) {
	rec := approvalRecord(ig.a, approvalIgnored, by, ig.why)
	rec.AlsoIgnored = ig.more
	s.audit.Approval(rec)
	for tool, n := range ig.tools {
		s.metrics.Approvals.WithLabelValues(tool, approvalIgnored).Add(float64(n))
	}
}

// approvalAlready starts the reason of an answer to an approval decided
// already.
const approvalAlready = "the approval is already "

// answer applies one approval-responded part from the chat client. An
// answer that does not count is returned with why, for auditIgnored.
func (s *Server) answer(ctx context.Context, tx *transcript, rows map[string]*store.Approval, p engine.UIPart) (*store.Approval, string) {
	by := tx.principal.Subject
	a := rows[p.Approval.ID]
	switch {
	case a == nil || a.ToolCallID != p.ToolCallID:
		// Every field but the tenant and session is the client's: the
		// tool name becomes a label only when it is configured.
		return &store.Approval{ID: p.Approval.ID, Tenant: tx.tenant, SessionID: tx.session, ToolCallID: p.ToolCallID,
			ToolName: s.metrics.ToolLabel(p.ToolPartName())}, "no such approval is pending for this tool call of this session"
	case a.State != store.ApprovalPending:
		return a, approvalAlready + a.State
	}
	if why := mayDecide(tx.principal, a); why != "" {
		return a, why
	}
	// The chat request continues the message itself (decidedPlan).
	d, err := s.decide(ctx, a, *p.Approval.Approved, by, p.Approval.Reason, nil)
	if err != nil {
		return a, err.Error()
	}
	*a = *d
	return nil, ""
}

// decide decides a as approved or denied by by, and audits it. With
// resume, the decision that is its message's last queues the turn's resume
// in the same transaction.
func (s *Server) decide(ctx context.Context, a *store.Approval, approved bool, by, reason string, resume store.Resume) (*store.Approval, error) {
	state := store.ApprovalDenied
	if approved {
		state = store.ApprovalApproved
	}
	d, sub, err := s.store.DecideApproval(ctx, a.Tenant, a.ID, store.Decision{State: state, By: by, Reason: reason, At: time.Now().UTC(), Resume: resume})
	if err != nil {
		return nil, err
	}
	s.auditApproval(d, state, by, "")
	if sub != nil {
		s.subs.notify()
	}
	return d, nil
}

// mayDecide says why p may not decide a, or "" when it may. A chat-user
// approval (no approvers) anyone who may use the session decides. A
// role-gated one needs a holder of one of its roles who is not the
// principal whose turn asked for it: a requester holding the role would
// otherwise approve its own call. An approvers list that names
// opa.ApproverRequester lets the requester decide too.
func mayDecide(p engine.Principal, a *store.Approval) string {
	if len(a.Approvers) == 0 {
		return ""
	}
	var requester engine.Principal
	if err := json.Unmarshal(a.Principal, &requester); err != nil || requester.Subject == "" {
		// Without its requester the self-approval check cannot hold:
		// closed, not open.
		return "the approval does not record which principal asked for it"
	}
	self := requester.Tenant == p.Tenant && requester.Subject == p.Subject
	if self && slices.Contains(a.Approvers, opa.ApproverRequester) {
		return ""
	}
	holds := slices.ContainsFunc(a.Approvers, func(role string) bool {
		name, ok := strings.CutPrefix(role, opa.ApproverRolePrefix)
		return ok && slices.Contains(p.Roles, name)
	})
	switch {
	case !holds:
		return "the principal holds none of the approver roles " + strings.Join(a.Approvers, ", ")
	case self:
		return "the principal asked for this approval itself; only a rule whose approvers name \"" + opa.ApproverRequester + "\" lets the requester decide"
	}
	return ""
}

// decidedPlan continues stored (the session's last message) when every
// approval it waits for is decided, with the decisions as the engine's
// approval responses; otherwise nothing runs (the guard response), and the
// skipped turn's result lists the approvals still pending.
func (s *Server) decidedPlan(ctx context.Context, tx *transcript, stored *engine.UIMessage) (*plan, error) {
	rows, err := s.messageApprovals(ctx, tx, stored)
	if err != nil {
		return nil, err
	}
	var responses []engine.ApprovalResponse
	var waiting []engine.PendingApproval
	for _, p := range stored.Parts {
		if !p.IsTool() || p.State != engine.ToolStateApprovalRequested || p.Approval == nil {
			continue
		}
		a := rows[p.Approval.ID]
		switch {
		case a == nil || a.ToolCallID != p.ToolCallID:
			// Its approval was never stored: it can never be given.
			responses = append(responses, engine.ApprovalResponse{ApprovalID: p.Approval.ID, ToolCallID: p.ToolCallID, Reason: "the approval was not recorded"})
		case a.State == store.ApprovalPending:
			w := engine.PendingApproval{ApprovalID: a.ID, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Input: a.Input}
			_ = json.Unmarshal(a.Reasons, &w.Reasons)
			waiting = append(waiting, w)
		default:
			responses = append(responses, engine.ApprovalResponse{ApprovalID: a.ID, ToolCallID: a.ToolCallID,
				Approved: a.State == store.ApprovalApproved, Reason: a.Reason, Input: a.Input})
		}
	}
	if len(waiting) > 0 || len(responses) == 0 {
		return &plan{skip: true, skipMessageID: stored.ID, waiting: waiting}, nil
	}
	return &plan{continuation: true, messageID: stored.ID, entry: engine.EntryToolResult, approvals: responses}, nil
}

// supersededReason denies the approvals of a message the session moved on
// from: the user sent a new message instead of answering.
const supersededReason = "superseded: the user sent a new message"

// awaitingMessage returns the id of the session's last message when it
// awaits approval, else "".
func awaitingMessage(tx *transcript) string {
	if l := tx.last(); l != nil && awaitsApproval(l) {
		return l.ID
	}
	return ""
}

// supersedeApprovals denies the pending approvals of message waiting once
// the session has moved on to a new user message: the model no longer sees
// such calls (protocols.md A.12: approval-requested parts before the last
// user message are dropped), and approvers no longer see them pending.
func (s *Server) supersedeApprovals(ctx context.Context, tx *transcript, waiting string) {
	l := tx.last()
	if waiting == "" || tx.st == nil || l == nil || l.Role != engine.RoleUser {
		return
	}
	list, err := s.store.ListApprovals(ctx, tx.tenant, store.ApprovalFilter{SessionID: tx.session, State: store.ApprovalPending})
	if err != nil {
		s.log.Error("listing approvals", "session", tx.session, "err", err)
		return
	}
	for i := range list {
		if list[i].MessageID != waiting {
			continue
		}
		d, _, err := s.store.DecideApproval(ctx, tx.tenant, list[i].ID,
			store.Decision{State: store.ApprovalDenied, Reason: supersededReason, At: time.Now().UTC()})
		if err == nil {
			s.auditApproval(d, store.ApprovalDenied, "", "")
		}
	}
}

// resumePlan is the prepare of a submission that resumes the turn of
// message messageID after its approvals were decided: a no-op (skipped)
// when the session moved on or the message was continued already.
func (s *Server) resumePlan(messageID string) func(ctx context.Context, tx *transcript) (*plan, error) {
	return func(ctx context.Context, tx *transcript) (*plan, error) {
		stored := tx.last()
		if stored == nil || stored.ID != messageID || !awaitsApproval(stored) {
			return &plan{skip: true, skipMessageID: messageID}, nil
		}
		return s.decidedPlan(ctx, tx, stored)
	}
}

// resumeTurn is the store.Resume of the decisions made through the API and
// by expiry: the durable submission that resumes the turn of the approval's
// message as the principal it ran for, continuing ctx's trace. Its
// idempotency key makes it one per round of approvals, however many
// deciders queue it.
func resumeTurn(ctx context.Context) store.Resume {
	trace := tracing.Save(ctx)
	return func(a *store.Approval) *store.Submission {
		var prin engine.Principal
		_ = json.Unmarshal(a.Principal, &prin)
		raw, _ := json.Marshal(submissionRequest{Principal: prin, ResumeMessage: a.MessageID, Trace: trace})
		return &store.Submission{Tenant: a.Tenant, SessionID: a.SessionID, Agent: a.Agent,
			IdempotencyKey: approvalResumeKey(a.RequestID), Request: raw}
	}
}

// expireApprovals decides every approval expired at now and, in the same
// transaction, queues the resume of the turns whose approvals it completes.
func (s *Server) expireApprovals(ctx context.Context, now time.Time) {
	expired, subs, err := s.store.ExpireApprovals(ctx, now, resumeTurn(ctx))
	if err != nil {
		s.log.Error("expiring approvals", "err", err)
		return
	}
	for i := range expired {
		s.auditApproval(&expired[i], store.ApprovalExpired, "", "")
	}
	if len(subs) > 0 {
		s.subs.notify()
	}
}

// sweepApprovals starts expiring approvals: at once (those that expired
// while no gateway ran), then every sweep interval, until the returned
// stop.
func (s *Server) sweepApprovals() (stop func()) {
	interval := min(max(s.conf().Limits.ApprovalExpiry/4, 10*time.Millisecond), time.Second)
	return atOnceThenEvery(interval, func(ctx context.Context) bool {
		s.expireApprovals(ctx, time.Now().UTC())
		return true
	})
}

// pendingApprovals counts the pending approvals of each configured tenant
// (turngate_approvals_pending), in one count by tenant: a scrape reads no
// approval rows.
func (s *Server) pendingApprovals(ctx context.Context) (map[string]int, error) {
	counts, err := s.store.CountPendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, t := range s.conf().Tenants() {
		out[t] = counts[t]
	}
	return out, nil
}

// approvalResponse is an approval as /v1/approvals shows it.
type approvalResponse struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"sessionId"`
	Agent       string          `json:"agent"`
	MessageID   string          `json:"messageId"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Input       json.RawMessage `json:"input"`
	Reasons     json.RawMessage `json:"reasons"`
	Approvers   []string        `json:"approvers"`
	State       string          `json:"state"`
	RequestedAt time.Time       `json:"requestedAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	DecidedAt   *time.Time      `json:"decidedAt,omitempty"`
	DecidedBy   string          `json:"decidedBy,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

func newApprovalResponse(a *store.Approval) approvalResponse {
	r := approvalResponse{ID: a.ID, SessionID: a.SessionID, Agent: a.Agent, MessageID: a.MessageID, ToolCallID: a.ToolCallID,
		ToolName: a.ToolName, Input: a.Input, Reasons: a.Reasons, Approvers: a.Approvers, State: a.State,
		RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, DecidedBy: a.DecidedBy, Reason: a.Reason}
	if !a.DecidedAt.IsZero() {
		r.DecidedAt = &a.DecidedAt
	}
	return r
}

// approvalsDecided is the state filter of the approvals history: approved,
// denied and expired alike.
const approvalsDecided = "decided"

// listApprovals serves GET /v1/approvals?state=pending&sessionId=…: the
// tenant's approvals the caller may decide (it holds one of their approver
// roles), oldest first. state defaults to pending; "decided" lists the
// approved, denied and expired ones (the history), "all" every state.
func (s *Server) listApprovals(c *gin.Context) error {
	f := store.ApprovalFilter{State: c.DefaultQuery("state", store.ApprovalPending), SessionID: c.Query("sessionId")}
	decided := f.State == approvalsDecided
	switch f.State {
	case store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired:
	case "all", approvalsDecided:
		f.State = ""
	default:
		return errField("state", "must be pending, approved, denied, expired, decided or all, not %q", f.State)
	}
	if f.SessionID != "" && !validID(f.SessionID) {
		return errField("sessionId", "is not a valid session id")
	}
	p := principal(c)
	list, err := s.store.ListApprovals(c.Request.Context(), p.Tenant, f)
	if err != nil {
		return err
	}
	out := []approvalResponse{}
	for i := range list {
		if decided && list[i].State == store.ApprovalPending {
			continue
		}
		if len(list[i].Approvers) > 0 && mayDecide(p, &list[i]) == "" {
			out = append(out, newApprovalResponse(&list[i]))
		}
	}
	c.JSON(http.StatusOK, gin.H{"approvals": out})
	return nil
}

// getApproval serves GET /v1/approvals/{id}: one approval, with the input
// that would run, to a principal who may decide it (what an approval
// webhook's receiver reads, the webhook's body carrying no input); 403
// naming why to one who may not, 404 for another tenant's.
func (s *Server) getApproval(c *gin.Context) error {
	a, err := s.tenantApproval(c)
	if err != nil {
		return err
	}
	if why := mayDecide(principal(c), a); why != "" {
		return errorf(http.StatusForbidden, CodeForbidden, "you may not decide this approval: %s", why)
	}
	c.JSON(http.StatusOK, newApprovalResponse(a))
	return nil
}

// tenantApproval loads the approval the request's :id names, of the
// caller's tenant.
func (s *Server) tenantApproval(c *gin.Context) (*store.Approval, error) {
	id := c.Param("id")
	if !validID(id) {
		return nil, errApprovalNotFound
	}
	a, err := s.store.GetApproval(c.Request.Context(), principal(c).Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errApprovalNotFound
	}
	return a, err
}

// decisionRequest is the body of POST /v1/approvals/{id}.
type decisionRequest struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// maxDecisionReason bounds an approver's reason (the model sees it).
const maxDecisionReason = 4096

// decodeDecision parses and checks a decision body; it is the parser of
// the approvers' untrusted input (fuzzed).
func decodeDecision(data []byte) (*decisionRequest, error) {
	var req decisionRequest
	if err := decodeStrictJSON(data, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Approved == nil:
		return nil, errField("approved", "is required (true or false)")
	case len(req.Reason) > maxDecisionReason:
		return nil, errField("reason", "is longer than %d bytes", maxDecisionReason)
	}
	return &req, nil
}

// errApprovalNotFound answers for a missing approval and for another
// tenant's alike.
var errApprovalNotFound = &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "approval not found"}

// decideApproval serves POST /v1/approvals/{id} {approved, reason?}: the
// decision of a principal holding one of the approval's roles (anyone of
// the tenant for a chat-user approval). 409 when it is decided already or
// expired; the turn resumes on its own once its approvals are decided.
func (s *Server) decideApproval(c *gin.Context) error {
	ctx := c.Request.Context()
	id := c.Param("id")
	if !validID(id) {
		return errApprovalNotFound
	}
	data, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeDecision(data)
	if err != nil {
		return err
	}
	p := principal(c)
	a, err := s.tenantApproval(c)
	if err != nil {
		return err
	}
	if why := mayDecide(p, a); why != "" {
		s.auditApproval(a, approvalIgnored, p.Subject, why)
		return errorf(http.StatusForbidden, CodeForbidden, "you may not decide this approval: %s", why)
	}
	d, err := s.decide(ctx, a, *req.Approved, p.Subject, req.Reason, resumeTurn(ctx))
	switch {
	case errors.Is(err, store.ErrConflict):
		s.auditApproval(a, approvalIgnored, p.Subject, "decided already or expired")
		return errorf(http.StatusConflict, CodeConflict, "approval %s is decided already or expired", id)
	case errors.Is(err, store.ErrNotFound):
		return errApprovalNotFound
	case err != nil:
		return err
	}
	c.JSON(http.StatusOK, newApprovalResponse(d))
	return nil
}

// approvalNotice is the text the OpenAI-compatible endpoint appends for
// calls held for approval ("" when none). That endpoint keeps no session,
// so nothing can resume the turn: the calls did not run, and the answer
// ends with finish_reason "stop" and this text, which an unmodified
// OpenAI client shows as the assistant's content.
func approvalNotice(res *engine.TurnResult) string {
	var lines []string
	for _, p := range res.PendingApprovals {
		lines = append(lines, "Tool call "+p.ToolName+" ("+p.ToolCallID+") was not run: it needs approval ("+p.Reason()+
			"), which this endpoint cannot ask for. Use the chat or sessions API of turngate to approve it.")
	}
	return strings.Join(lines, "\n")
}

// pendingApproval is a turn result's approval awaiting a decision.
type pendingApproval struct {
	ApprovalID string                  `json:"approvalId"`
	ToolCallID string                  `json:"toolCallId"`
	ToolName   string                  `json:"toolName"`
	Input      json.RawMessage         `json:"input"`
	Reasons    []engine.ApprovalReason `json:"reasons"`
}

// pendingApprovals lists res's approvals for a turn response.
func pendingApprovals(res *engine.TurnResult) []pendingApproval {
	var out []pendingApproval
	for _, p := range res.PendingApprovals {
		out = append(out, pendingApproval{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: p.Input, Reasons: p.Reasons})
	}
	return out
}
