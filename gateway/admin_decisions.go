package gateway

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
)

// newDecisionWriter makes the writer that copies the audit log's hook
// records into the store, tapping the audit log; nil when
// decisions.store is false. linger is the writer's Options.Linger.
func (s *Server) newDecisionWriter(now func() time.Time, linger time.Duration) *decisions.Writer {
	if !s.conf().Decisions.Stored() {
		return nil
	}
	w := decisions.New(s.store, decisions.Options{Retention: s.conf().Decisions.Retention, Linger: linger, Now: now, Logger: s.log, Metrics: s.metrics})
	s.audit.SetTap(w.Tap)
	return w
}

// flushDecisions stores the hook records still queued at shutdown, for
// at most the store's timeout; what is left is logged (the JSONL audit
// log has it).
func (s *Server) flushDecisions(ctx context.Context) {
	if err := s.storeQueuedDecisions(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("decision store: records not stored at shutdown (the JSONL audit log has them)", "pending", s.decisions.Pending(), "err", err)
	}
}

// storeQueuedDecisions waits, at most the store's timeout, until the hook
// records written to the audit log so far are in the decision store; nil
// without a decision store.
func (s *Server) storeQueuedDecisions(ctx context.Context) error {
	if s.decisions == nil {
		return nil
	}
	s.audit.Flush()
	fctx, cancel := context.WithTimeout(ctx, cmp.Or(s.conf().Store.Timeout, store.DefaultTimeout))
	defer cancel()
	return s.decisions.Flush(fctx)
}

// decisionsErased tells the decision writer, if any, that the tenant's
// session was erased, here or on another replica (ChannelErased), so the
// session's records it still holds do not reach the store after the
// erasure (decisions.Writer.Erased).
func (s *Server) decisionsErased(tenant, sessionID string) {
	if s.decisions != nil {
		s.decisions.Erased(tenant, sessionID)
	}
}

// decisionScope is whose records p, an admin, may see: a global admin
// (RoleGlobalAdmin too) every tenant's, a tenant admin its own tenant's.
func decisionScope(p engine.Principal) decisions.Scope {
	return decisions.Scope{AllTenants: slices.Contains(p.Roles, RoleGlobalAdmin), Tenant: p.Tenant}
}

// listDecisions serves GET /v1/admin/decisions: the stored hook records
// the query selects, newest first (order=asc: oldest first, as
// turn=ID&order=asc gives a turn's timeline), with a cursor to the next
// page.
func (s *Server) listDecisions(c *gin.Context) error {
	v, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		return errBadRequest("the query string does not parse: %v", err)
	}
	q, err := decisions.ParseQuery(v, decisionScope(principal(c)))
	if err != nil {
		return paramError(err)
	}
	page, err := decisions.List(c.Request.Context(), s.store, q)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, page)
	return nil
}

// getDecision serves GET /v1/admin/decisions/{id}: one stored record; 404
// for a missing one and for another tenant's alike.
func (s *Server) getDecision(c *gin.Context) error {
	if len(c.Request.URL.RawQuery) > 0 {
		return errBadRequest("this endpoint takes no query parameters")
	}
	e, err := decisions.Get(c.Request.Context(), s.store, c.Param("id"), decisionScope(principal(c)))
	if errors.Is(err, decisions.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeNotFound, "decision not found")
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, e)
	return nil
}

// paramError maps a *decisions.ParamError to a 400 naming the parameter.
func paramError(err error) error {
	var pe *decisions.ParamError
	if errors.As(err, &pe) {
		ae := errBadRequest("query parameter %s: %s", pe.Param, pe.Message)
		ae.QueryParam = pe.Param
		return ae
	}
	return err
}

// replayRequest is the body of POST /v1/admin/replay.
type replayRequest struct {
	Candidate *candidateRequest `json:"candidate"`
	Since     *time.Time        `json:"since"`
	Until     *time.Time        `json:"until"`
	Limit     int               `json:"limit"`
}

// replayDecisions serves POST /v1/admin/replay: the stored decision
// records of [since, until) (at most limit, the caller's tenant only for
// a tenant admin) replayed against a candidate built from the posted
// files, reported as `turngate replay --format json` reports an audit
// log, each example naming its record's id.
func (s *Server) replayDecisions(c *gin.Context) error {
	data, err := readBody(c)
	if err != nil {
		return err
	}
	var req replayRequest
	if err := decodeStrictJSON(data, &req); err != nil {
		return err
	}
	switch {
	case req.Candidate == nil:
		return errField("candidate", "is required: {\"files\": {\"name.rego\": \"…\"}}")
	case req.Since == nil:
		return errField("since", "is required: the RFC 3339 time the replayed records start at")
	case req.Limit < 0 || req.Limit > decisions.MaxReplayRecords:
		return errField("limit", "must be from 1 to %d (default %d)", decisions.MaxReplayRecords, decisions.DefaultReplay)
	}
	q := &decisions.Query{}
	q.Since = *req.Since
	if req.Until != nil {
		if !req.Until.After(*req.Since) {
			return errField("until", "must be after since")
		}
		q.Until = *req.Until
	}
	if scope := decisionScope(principal(c)); !scope.AllTenants {
		q.Tenant = scope.Tenant
	}
	rev, err := decisions.Candidate(req.Candidate.Files)
	if err != nil {
		return candidateError(err)
	}
	rep, err := decisions.Replay(c.Request.Context(), s.store, rev, q, cmp.Or(req.Limit, decisions.DefaultReplay))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, rep)
	return nil
}

// candidateError maps a candidate's refusal to a 400: its positioned
// diagnostics, or the field that is wrong.
func candidateError(err error) error {
	var errs policy.Errors
	if errors.As(err, &errs) {
		ae := errorf(http.StatusBadRequest, CodeRulesInvalid, "the candidate rules were rejected (they do not compile or their tests fail)")
		ae.Details = errs
		return ae
	}
	var pe *decisions.ParamError
	if errors.As(err, &pe) {
		return errField(pe.Param, "%s", pe.Message)
	}
	return err
}
