package gateway

import (
	"context"
	"errors"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/sessionctx"
	"github.com/turngate/turngate/gateway/store"
)

// buildSessions gives every agent with a session configuration its
// sessionctx.Agent.
func (s *Server) buildSessions() {
	for i := range s.cfg.Agents {
		a := &s.cfg.Agents[i]
		if a.Session == nil {
			continue
		}
		s.agents[a.Name].session = sessionctx.New(a.Session, a.System, sessionctx.Deps{
			Store: s.store, Models: s.engine.Models(), Log: s.log,
			OnCompaction: func(_ context.Context, id engine.Identity, c *store.Compaction) {
				s.metrics.Compactions.WithLabelValues(id.Agent, c.Reason).Inc()
				s.audit.Compaction(&id, &audit.Compaction{Reason: c.Reason, InputTokens: c.InputTokens,
					ThroughMessageID: c.ThroughMessageID, MessageCount: c.MessageCount, Model: c.Model, Summary: c.Summary})
			},
		})
	}
}

// applySession applies the agent's session configuration to req: the
// system prompt built from its context blocks, the messages after the
// compaction summary, its tools. When the turn cannot run (a context block
// unavailable, a failed compaction) it emits the error and returns the
// failed turn's result.
func (s *Server) applySession(ctx context.Context, in *turnInput, req *engine.TurnRequest) *engine.TurnResult {
	ag := in.agent.session
	if ag == nil {
		return nil
	}
	t, err := ag.Prepare(ctx, req.Identity, req.Messages, !in.ephemeral)
	if err != nil {
		return s.sessionFailed(req, err)
	}
	req.System, req.Messages, req.Session = t.System, t.Messages, t.Info
	req.Tools = append(req.Tools, t.Tools...)
	return nil
}

// sessionFailed ends a turn whose session configuration failed before the
// model ran, naming the failure to the client without its internals.
func (s *Server) sessionFailed(req *engine.TurnRequest, err error) *engine.TurnResult {
	text := "the conversation could not be prepared (session configuration); see the gateway log"
	var ue *sessionctx.UnavailableError
	if errors.As(err, &ue) {
		text = ue.Error()
	}
	s.log.Error("preparing the session context", "requestId", req.RequestID, "session", req.SessionID, "err", err)
	id := req.MessageID
	if id == "" {
		id = newID("msg_")
	}
	req.Emit(engine.Event{Type: engine.EventStart, MessageID: id})
	req.Emit(engine.Event{Type: engine.EventError, ErrorText: text})
	req.Emit(engine.Event{Type: engine.EventFinish, FinishReason: engine.FinishError})
	return &engine.TurnResult{
		Message: engine.UIMessage{ID: id, Role: engine.RoleAssistant},
		Status:  engine.StatusError, Error: text, FinishReason: engine.FinishError, Continuation: req.Continuation,
	}
}

// observeSession records what the next turn's compaction measures.
func (s *Server) observeSession(ctx context.Context, in *turnInput, req *engine.TurnRequest, res *engine.TurnResult) {
	if ag := in.agent.session; ag != nil && !in.ephemeral {
		ag.Observe(ctx, req.Identity, res)
	}
}
