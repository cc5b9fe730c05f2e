package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/decisions"
)

// newDecisionWriter makes the writer that copies the audit log's hook
// records into the store, tapping the audit log; nil when
// decisions.store is false.
func (s *Server) newDecisionWriter(now func() time.Time) *decisions.Writer {
	if !s.cfg.Decisions.Stored() {
		return nil
	}
	w := decisions.New(s.store, decisions.Options{Retention: s.cfg.Decisions.Retention, Now: now, Logger: s.log, Metrics: s.metrics})
	s.audit.SetTap(w.Tap)
	return w
}

// flushDecisions stores the hook records still queued at shutdown, for
// at most the store's timeout; what is left is logged (the JSONL audit
// log has it).
func (s *Server) flushDecisions(ctx context.Context) {
	if s.decisions == nil {
		return
	}
	s.audit.Flush()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Store.Timeout)
	defer cancel()
	if err := s.decisions.Flush(fctx); err != nil {
		s.log.Error("decision store: records not stored at shutdown (the JSONL audit log has them)", "pending", s.decisions.Pending(), "err", err)
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
