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
	for i := range s.conf().Agents {
		a := &s.conf().Agents[i]
		if a.Session == nil {
			continue
		}
		s.agents()[a.Name].session = sessionctx.New(a.Session, a.System, sessionctx.Deps{
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
	if err := prepareSession(ctx, in.agent.session, req, !in.ephemeral); err != nil {
		return s.sessionFailed(req, err)
	}
	return nil
}

// prepareSession applies ag's session configuration, when it has one, to
// req, whose session is stored or not (see sessionctx.Agent.Prepare).
func prepareSession(ctx context.Context, ag *sessionctx.Agent, req *engine.TurnRequest, stored bool) error {
	if ag == nil {
		return nil
	}
	t, err := ag.Prepare(ctx, req.Identity, req.Messages, stored)
	if err != nil {
		return err
	}
	req.System, req.Messages, req.Session = t.System, t.Messages, t.Info
	req.Tools = append(req.Tools, t.Tools...)
	return nil
}

// prepareSubAgent applies a sub-agent's session configuration to its turn
// (agenttool.EngineRunner.Prepare). A sub-agent's session is the call's
// own (agenttool.SessionID: the parent's session and tool call id),
// holding the one prompt and stored nowhere; so it gets what a turn without
// a stored session gets: the system prompt assembled from its static
// context blocks (ordered and marked for caching with cachedPrompt),
// writable blocks shown empty, and no update_context, search_history or
// compaction. An unavailable block fails the call (the parent's model
// sees the tool error naming the block; other failures, a generic one).
func (s *Server) prepareSubAgent(ctx context.Context, turn *engine.TurnRequest) error {
	if err := s.kill.CheckTurn(&turn.Identity); err != nil {
		return err // a kill switch stops the sub-agent's turns too
	}
	ag, ok := s.agents()[turn.Identity.Agent]
	if !ok {
		return nil
	}
	err := prepareSession(ctx, ag.session, turn, false)
	if err != nil {
		s.log.Error("preparing a sub-agent's session context", "requestId", turn.RequestID, "session", turn.SessionID, "agent", ag.name, "err", err)
		var ue *sessionctx.UnavailableError
		if errors.As(err, &ue) { // names the block, not the source's details
			return engine.PublicError(ue.Error(), err)
		}
	}
	return err
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
