package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/gateway/quota"
	"github.com/turngate/turngate/gateway/store"
)

// CodeQuotaExceeded answers a turn over one of the config's quotas.
const CodeQuotaExceeded = "quota_exceeded"

// admitTurn is the check every turn passes before its session is locked
// and its model called, on every entry path (chat, WebSocket,
// saveMessages, submissions, continuations, OpenAI): the kill switches'
// turn stops, then the config's quotas, which count the turn. A refusal is
// returned as an error that admissionError maps onto each path's answer.
func (s *Server) admitTurn(ctx context.Context, in *turnInput) (*quota.Admission, error) {
	id := &engine.Identity{RequestID: in.requestID, SessionID: in.sessionID, Agent: in.agent.name, Principal: in.principal, EntryPath: in.entry}
	if err := s.kill.CheckTurn(id); err != nil {
		return nil, err
	}
	return s.quotas.AdmitTurn(ctx, id)
}

// stepBudget is the check a running turn passes before each further model
// step: a turns kill switch set since it started, then its token quotas.
func (s *Server) stepBudget(id engine.Identity) func(context.Context) string {
	quotas := s.quotas.StepBudget(id)
	return func(ctx context.Context) string {
		if why := s.kill.CheckStep(&id); why != "" {
			return why
		}
		if quotas != nil {
			return quotas(ctx)
		}
		return ""
	}
}

// unadmit counts a turn the quotas admitted as refused after all: it did
// not start (its session's queue was full, the session was not found…).
func (s *Server) unadmit(ctx context.Context, in *turnInput, a *quota.Admission) {
	if err := a.Refuse(ctx); err != nil {
		s.log.Warn("settling a turn that did not start in the quotas", "requestId", in.requestID, "err", err)
	}
}

// newQuotas compiles the config's quotas onto the declared state: refusals
// are decision records in the audit log and counted in the metrics.
func (s *Server) newQuotas(now func() time.Time) (*quota.Quotas, error) {
	return quota.New(s.conf().Quotas, s.state, quota.Options{
		Now:      now,
		Record:   s.audit.Record,
		Exceeded: func(name, per, at string) { s.metrics.QuotaExceeded.WithLabelValues(name, per, at).Inc() },
		Used: func(name, tenant string, used, limit int64) {
			s.metrics.QuotaUsedRatio.WithLabelValues(name, s.metrics.TenantLabel(tenant)).Set(float64(used) / float64(limit))
		},
		Logger: s.log,
	})
}

// admissionError returns the API error of an admission refusal, nil for
// another error.
func admissionError(err error) *apiError {
	if _, ok := errors.AsType[*killswitch.StoppedError](err); ok {
		return killSwitchError()
	}
	if ex, ok := errors.AsType[*quota.ExceededError](err); ok {
		return quotaError(ex)
	}
	// A store outage is answered as every store outage is (toAPIError);
	// any other failure to read the quotas refuses the turn as well.
	if errors.Is(err, quota.ErrUnavailable) && !errors.Is(err, store.ErrUnavailable) {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the quotas could not be checked; retry",
			RetryAfter: time.Second, Retryable: true}
	}
	return nil
}

// quotaError is a quota's refusal: 429 quota_exceeded with Retry-After, and
// OpenAI's x-ratelimit-* headers for what the quota counts (requests for
// turns, tokens for token budgets), which the OpenAI SDKs read.
func quotaError(ex *quota.ExceededError) *apiError {
	kind := "requests"
	if ex.What != "turns" {
		kind = "tokens"
	}
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeQuotaExceeded, Message: ex.Error(), RetryAfter: ex.RetryAfter, Retryable: true,
		Headers: map[string]string{
			"x-ratelimit-limit-" + kind:     strconv.FormatInt(ex.Limit, 10),
			"x-ratelimit-remaining-" + kind: "0",
			"x-ratelimit-reset-" + kind:     ex.RetryAfter.Round(1e9).String(),
		}}
}
