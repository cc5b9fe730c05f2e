package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/erasure"
	"github.com/turngate/turngate/gateway/store"
)

// CodeTurnRunning refuses the erasure of a session whose turn is running
// (on any replica): cancel it (POST …/cancel) and erase again.
const CodeTurnRunning = "turn_running"

// defaultSessionPage is the page size of GET …/sessions without limit.
const defaultSessionPage = 100

// listAgents serves GET /v1/agents: the agents the caller may use, which
// are every tenant's.
func (s *Server) listAgents(c *gin.Context) error {
	type agentItem struct {
		Name  string   `json:"name"`
		Model string   `json:"model"`
		Tools []string `json:"tools"`
	}
	out := []agentItem{}
	for _, name := range slices.Sorted(maps.Keys(s.agents())) {
		a := s.agents()[name]
		out = append(out, agentItem{Name: name, Model: a.model, Tools: append([]string{}, a.toolNames...)})
	}
	c.JSON(http.StatusOK, gin.H{"agents": out})
	return nil
}

// listSessions serves GET /v1/agents/{agent}/sessions: the caller's
// tenant's sessions of the agent, by id, a page at a time (limit, and
// cursor: the nextCursor of the page before).
func (s *Server) listSessions(c *gin.Context) error {
	ag, err := s.agentOf(c)
	if err != nil {
		return err
	}
	limit := defaultSessionPage
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxListSessions {
			return errBadRequest("limit must be a whole number from 1 to %d, not %q", store.MaxListSessions, v)
		}
		limit = n
	}
	after := c.Query("cursor")
	if after != "" && !validID(after) {
		return errBadRequest("cursor %q is not a session id (use the nextCursor of the page before)", after)
	}
	page, err := s.store.ListSessions(c.Request.Context(), principal(c).Tenant, ag.name, after, limit)
	if err != nil {
		return err
	}
	type sessionItem struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"createdAt"`
		UpdatedAt time.Time `json:"updatedAt"`
	}
	items := make([]sessionItem, 0, len(page))
	for _, p := range page {
		items = append(items, sessionItem{p.ID, p.CreatedAt, p.UpdatedAt})
	}
	body := gin.H{"sessions": items}
	if len(page) == limit {
		body["nextCursor"] = page[len(page)-1].ID
	}
	c.JSON(http.StatusOK, body)
	return nil
}

// exportSession serves GET …/sessions/{id}/export: one JSON document of
// everything stored for the session.
func (s *Server) exportSession(c *gin.Context) error {
	_, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	d, err := s.store.ExportSession(c.Request.Context(), principal(c).Tenant, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, erasure.NewDocument(d))
	return nil
}

// deleteSession serves DELETE …/sessions/{id}: it erases everything
// stored for the session and answers its audit tombstone. A session whose
// turn runs, here or on another replica, is refused with 409
// turn_running: the erasure takes the session's turn lock (without
// waiting), so no turn starts while it runs either.
func (s *Server) deleteSession(c *gin.Context) error {
	_, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	p := principal(c)
	ctx := c.Request.Context()
	release, err := s.holdIdle(ctx, p.Tenant, id)
	if err != nil {
		return err
	}
	defer release()
	t, err := erasure.Erase(ctx, s.store, s.audit, time.Now().UTC(), erasure.Request{Tenant: p.Tenant, SessionID: id,
		Reason: audit.ErasureRequested, By: p.Subject, ByTenant: p.Tenant, RequestID: requestID(c), Replica: s.conf().Replica.ID,
		Erased: s.decisionsErased})
	if err != nil {
		return err
	}
	s.log.Info("session erased", "tenant", p.Tenant, "session", id, "by", p.Subject)
	c.JSON(http.StatusOK, t)
	return nil
}

// errTurnRunning refuses to erase a session whose turn runs.
var errTurnRunning = &apiError{Status: http.StatusConflict, Code: CodeTurnRunning,
	Message: "a turn of this session is running; cancel it (POST …/cancel) and erase again", RetryAfter: time.Second}

// holdIdle takes the tenant's session's turn lock if nobody holds it (on a
// shared store, its lease), else fails with errTurnRunning; then it stores
// the hook records this replica still queues for the decision store, so
// the erasure that follows finds the session's last turn's records too.
func (s *Server) holdIdle(ctx context.Context, tenant, id string) (release func(), err error) {
	release, err = s.lockIdle(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := s.storeQueuedDecisions(ctx); err != nil {
		release()
		return nil, fmt.Errorf("%w: the decision records queued for the store could not be stored before the erasure: %v", store.ErrUnavailable, err)
	}
	return release, nil
}

// lockIdle is holdIdle's lock.
func (s *Server) lockIdle(ctx context.Context, tenant, id string) (release func(), err error) {
	if s.rep != nil {
		cfg := s.conf().Replica
		l, err := s.store.AcquireLease(ctx, tenant, id, cfg.ID, cfg.LeaseTTL)
		if errors.Is(err, store.ErrLeaseHeld) {
			return nil, errTurnRunning
		}
		if err != nil {
			return nil, err
		}
		return func() { _ = s.store.ReleaseLease(context.WithoutCancel(ctx), l) }, nil
	}
	release, ok := s.locks.tryAcquire(sessionKey(tenant, id))
	if !ok {
		return nil, errTurnRunning
	}
	return release, nil
}

// retentionInterval is how often each replica sweeps for idle sessions.
const retentionInterval = time.Minute

// newRetention returns the sweeper of the config's retentions; nil when
// none is set.
func (s *Server) newRetention(now func() time.Time) *erasure.Retention {
	tenants, agents := s.conf().TenantRetention(), s.conf().AgentRetention()
	if len(tenants)+len(agents) == 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &erasure.Retention{Store: s.store, Log: s.audit, Tenants: tenants, Agents: agents, Now: now,
		Replica: s.conf().Replica.ID, Logger: s.log, Erased: s.decisionsErased,
		Hold: func(ctx context.Context, tenant, id string) (func(), bool, error) {
			release, err := s.holdIdle(ctx, tenant, id)
			if errors.Is(err, errTurnRunning) {
				return nil, false, nil
			}
			return release, err == nil, err
		},
		Pruned: func(_, agent string) {
			if _, ok := s.agents()[agent]; !ok {
				agent = "other" // an agent no longer configured: the label set stays bounded
			}
			s.metrics.SessionsPruned.WithLabelValues(agent).Inc()
		},
	}
}

// runRetention sweeps for idle sessions every retentionInterval until ctx
// is done; a failed sweep is logged and the next one goes on.
func (s *Server) runRetention(ctx context.Context) {
	tick := time.NewTicker(retentionInterval)
	defer tick.Stop()
	for {
		if _, err := s.retention.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("retention: sweep failed; the next one retries", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
