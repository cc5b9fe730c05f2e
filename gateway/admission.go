package gateway

import (
	"context"
	"errors"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/killswitch"
)

// admitTurn is the check every turn passes before its session is locked
// and its model called, on every entry path (chat, WebSocket,
// saveMessages, submissions, continuations, OpenAI): the kill switches'
// turn stops. A refusal is returned as an error that admissionError maps
// onto each path's answer.
func (s *Server) admitTurn(_ context.Context, in *turnInput) error {
	id := &engine.Identity{RequestID: in.requestID, SessionID: in.sessionID, Agent: in.agent.name, Principal: in.principal, EntryPath: in.entry}
	return s.kill.CheckTurn(id)
}

// admissionError returns the API error of an admission refusal, nil for
// another error.
func admissionError(err error) *apiError {
	if _, ok := errors.AsType[*killswitch.StoppedError](err); ok {
		return killSwitchError()
	}
	return nil
}
