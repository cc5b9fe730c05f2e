package store

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/engine"
)

// The checks and column values of the Store calls, the same for both
// drivers.

// admitArgs checks an Admit's arguments and returns the last body as a
// column value and the user message encoded ("" when user is nil).
func admitArgs(tenant, agent, sessionID string, lastBody json.RawMessage, user *engine.UIMessage) (any, string, error) {
	if err := nonEmpty("tenant", tenant, "session id", sessionID, "agent", agent); err != nil {
		return nil, "", err
	}
	v, err := jsonArg("last body", lastBody)
	if err != nil {
		return nil, "", err
	}
	var body string
	if user != nil {
		if body, err = encodeMessage(*user); err != nil {
			return nil, "", err
		}
	}
	return v, body, nil
}

// submissionArgs checks a CreateSubmission's submission and returns its id
// (a new UUID when in has none) and its idempotency key as a column value:
// NULL when absent, since NULLs never collide in the unique index.
func submissionArgs(in *Submission) (id string, key any, err error) {
	if err := nonEmpty("tenant", in.Tenant, "session id", in.SessionID, "agent", in.Agent); err != nil {
		return "", nil, err
	}
	if len(in.Request) == 0 || !json.Valid(in.Request) {
		return "", nil, fmt.Errorf("%w: request is not JSON", ErrInvalid)
	}
	id = in.ID
	if id == "" {
		id = uuid.NewString()
	}
	if in.IdempotencyKey != "" {
		key = in.IdempotencyKey
	}
	return id, key, nil
}

// finishArgs checks a FinishSubmission's status and returns its result as
// a column value.
func finishArgs(status string, result json.RawMessage) (any, error) {
	if !finalStatus(status) {
		return nil, fmt.Errorf("%w: %q is not a final status", ErrInvalid, status)
	}
	return jsonArg("result", result)
}

// finishTurnArgs checks that rec is a record of the tenant's session and
// returns the arguments of the record-turn statement.
func finishTurnArgs(tenant, sessionID string, rec *TurnRecord) ([]any, error) {
	if rec.Tenant != tenant || rec.SessionID != sessionID {
		return nil, fmt.Errorf("%w: record of %s/%s for session %s/%s",
			ErrInvalid, rec.Tenant, rec.SessionID, tenant, sessionID)
	}
	return turnArgs(rec)
}
