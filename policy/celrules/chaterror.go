package celrules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/turngate/turngate/engine"
)

// onChatError rules choose the text a failure shows, by its class:
//
//	onChatError:
//	  - name: busy
//	    when: error.class == "rate_limit"
//	    set:
//	      message: '"The assistant is busy; try again in a minute."'
//
// The text replaces the engine's masked default ("An error occurred.") for
// the client, and for a tool error the text the model sees. A failure no
// rule matched keeps the default; so does a failure the rules could not
// evaluate (a masked text is the safe one to show).

// ChatError is the failure onChatError rules see as error.
type ChatError struct {
	// Stage is where the turn failed: setup, stream, tool or policy
	// (engine.StageSetup …).
	Stage string `json:"stage"`
	// Class is the failure's error class (engine.ClassifyError):
	// context_overflow, rate_limit, transient, fatal or unknown.
	Class string `json:"class"`
	// Message is the raw error text, never shown to clients unless a rule
	// sets it as message.
	Message string `json:"message"`
	// PartialMessage reports whether the assistant message already had
	// parts when the failure happened.
	PartialMessage bool `json:"partialMessage"`
}

// ChatErrorDecision is what the onChatError rules decided.
type ChatErrorDecision struct {
	// Message is the text shown instead of the masked default.
	Message string `json:"message"`
}

// errorFields are the fields onChatError rules set, by name.
var errorFields = map[string]*fieldSpec{
	"message": {name: "message", want: []*types.Type{types.StringType}, decode: decodeErrorText, copies: true},
}

// decodeErrorText decodes message: a non-empty text.
func decodeErrorText(v ref.Val) (any, error) {
	s, err := decodeString(v)
	if err == nil && strings.TrimSpace(s.(string)) == "" {
		return nil, fmt.Errorf("message needs a non-empty text")
	}
	return s, err
}

// setErrorField sets an onChatError field of a decision.
func setErrorField(*fieldSpec) func(*ChatErrorDecision, any) {
	return func(d *ChatErrorDecision, v any) { d.Message = v.(string) }
}

// HasOnChatError reports whether the set has onChatError rules.
func (s *Set) HasOnChatError() bool { return len(s.errorRules) > 0 }

// OnChatError evaluates the onChatError rules on a failure and returns the
// text to show; nil when no rule fired. Errors and shadow rules are as for
// BeforeTurn.
func (s *Set) OnChatError(ctx context.Context, e *engine.ChatErrorContext, now time.Time) (*ChatErrorDecision, Trace, error) {
	ce := NewChatError(e)
	return evalHook(ctx, s, s.errorRules, s.errorShadow, errorActivation(&e.Identity, &ce, now), setErrorField)
}

// NewChatError is the error onChatError rules see for e.
func NewChatError(e *engine.ChatErrorContext) ChatError {
	return ChatError{Stage: e.Stage, Class: e.Class, Message: e.Message, PartialMessage: e.PartialMessage}
}

// errorActivation binds onChatError's variables.
func errorActivation(id *engine.Identity, ce *ChatError, now time.Time) *activation {
	a := identityActivation(id, now)
	a.chatError = object{chatErrorType, ce}
	return a
}

// ChatErrorInput is what the onChatError rules see when they evaluate e at
// now, as an Input.
func ChatErrorInput(e *engine.ChatErrorContext, now time.Time) *Input {
	ce := NewChatError(e)
	p := e.Principal
	return &Input{Error: &ce, Agent: e.Agent, SessionID: e.SessionID, RequestID: e.RequestID,
		Deadline: e.Deadline, Aborted: e.Aborted, Principal: &p, Now: &now}
}

// errNoError is the dry-run error of an onChatError input without one.
var errNoError = errors.New("evaluating rules: an onChatError input needs error")
