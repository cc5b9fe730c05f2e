package gateway

import (
	"errors"
	"net/http"

	"github.com/turngate/turngate/engine"
)

// CodeTurnRefused answers a turn a beforeTurn rule refused (refuse): the
// message names the rule's reason; the user message is stored, the model
// was never called.
const CodeTurnRefused = "turn_refused"

// refusedError returns the 403 turn_refused error of a turn that ended
// with err, or nil when a rule did not refuse it.
func refusedError(err error) *apiError {
	re, ok := errors.AsType[*engine.TurnRefusedError](err)
	if !ok {
		return nil
	}
	return &apiError{Status: http.StatusForbidden, Code: CodeTurnRefused, Message: re.Reason}
}
