package celrules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// Input is a dry-run input for one hook, as read by `turngate eval`, the
// admin eval API and the cases of *_test.yaml files. In YAML or JSON:
//
//	turn:        # engine.TurnContext fields (its JSON names): system, messages,
//	             # tools, model, continuation, body, maxSteps, agent, sessionId,
//	             # requestId, entryPath, depth, attachments. For beforeStep, the
//	             # step's turn.
//	step:        # beforeStep only: engine.PrepareStepContext fields: stepNumber,
//	             # steps, model, system, messages, activeTools
//	principal:   # tenant, subject, roles; copied into the turn's and step's identity
//	now: "2025-01-01T12:00:00Z"   # the clock; default 1970-01-01T00:00:00Z
//	message:     # beforePersist only: the engine.UIMessage to store (id, role, parts)
//	error:       # onChatError only: the failure (stage, class, message, partialMessage)
//	agent:       # beforePersist and onChatError: the session's agent
//	sessionId:   # beforePersist and onChatError
//	requestId:   # beforePersist and onChatError
//	deadline: "2025-01-01T12:01:00Z"   # beforePersist and onChatError; default none
//	aborted:     # beforePersist and onChatError: the turn's abort signal had fired
//
// Unknown keys are errors, so a misspelt input field is not silently empty.
type Input struct {
	Turn      *engine.TurnContext        `json:"turn,omitempty"`
	Step      *engine.PrepareStepContext `json:"step,omitempty"`
	Principal *engine.Principal          `json:"principal,omitempty"`
	Now       *time.Time                 `json:"now,omitempty"`
	Message   *engine.UIMessage          `json:"message,omitempty"`
	Error     *ChatError                 `json:"error,omitempty"`
	Agent     string                     `json:"agent,omitempty"`
	SessionID string                     `json:"sessionId,omitempty"`
	RequestID string                     `json:"requestId,omitempty"`
	Deadline  time.Time                  `json:"deadline,omitzero"`
	Aborted   bool                       `json:"aborted,omitempty"`
}

// TurnInput is what the beforeTurn rules see when they evaluate tc at now,
// as an Input: its JSON is the input a decision record carries, and
// DecodeInput reads it back.
func TurnInput(tc *engine.TurnContext, now time.Time) *Input {
	return &Input{Turn: tc, Principal: &tc.Principal, Now: &now}
}

// StepInput is what the beforeStep rules see when they evaluate sc at now
// (turn is sc.Turn), as an Input.
func StepInput(sc *engine.PrepareStepContext, now time.Time) *Input {
	step := *sc
	step.Turn = nil
	return &Input{Turn: sc.Turn, Step: &step, Principal: &sc.Principal, Now: &now}
}

// DecodeInput decodes a dry-run input from YAML or JSON (JSON is YAML):
// one document, strictly.
func DecodeInput(data []byte) (*Input, error) {
	var doc any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		return nil, errors.New("decoding input: more than one document")
	}
	return inputFrom(doc)
}

// inputFrom decodes an already parsed YAML value strictly into an Input.
func inputFrom(doc any) (*Input, error) {
	if doc == nil {
		doc = map[string]any{}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in Input
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	return &in, nil
}

// TurnContext returns the input's turn with the principal applied.
func (in *Input) TurnContext() *engine.TurnContext {
	tc := &engine.TurnContext{}
	if in.Turn != nil {
		tc = in.Turn
	}
	if in.Principal != nil {
		tc.Principal = *in.Principal
	}
	return tc
}

// StepContext returns the input's step with the principal applied and the
// input's turn (if any) as the step's turn.
func (in *Input) StepContext() *engine.PrepareStepContext {
	sc := &engine.PrepareStepContext{}
	if in.Step != nil {
		sc = in.Step
	}
	if in.Principal != nil {
		sc.Principal = *in.Principal
	}
	if in.Turn != nil {
		sc.Turn = in.TurnContext()
	}
	return sc
}

// Clock returns the input's now, or the Unix epoch.
func (in *Input) Clock() time.Time {
	if in.Now != nil {
		return *in.Now
	}
	return time.Unix(0, 0).UTC()
}

// Identity is the turn identity of a beforePersist or onChatError input.
func (in *Input) Identity() *engine.Identity {
	id := &engine.Identity{Agent: in.Agent, SessionID: in.SessionID, RequestID: in.RequestID, Deadline: in.Deadline, Aborted: in.Aborted}
	if in.Principal != nil {
		id.Principal = *in.Principal
	}
	return id
}

// ChatErrorContext returns the input's error as onChatError's context.
func (in *Input) ChatErrorContext() *engine.ChatErrorContext {
	e := &engine.ChatErrorContext{Identity: *in.Identity()}
	if in.Error != nil {
		e.Stage, e.Class, e.Message, e.PartialMessage = in.Error.Stage, in.Error.Class, in.Error.Message, in.Error.PartialMessage
	}
	return e
}

// Eval runs one hook's rules on a dry-run input. The config is a
// *engine.TurnConfig for beforeTurn, a *engine.StepConfig for beforeStep,
// a *Persisted for beforePersist and a *ChatErrorDecision for
// onChatError, nil when no rule fired.
func (s *Set) Eval(ctx context.Context, hook string, in *Input) (any, Trace, error) {
	switch hook {
	case policy.HookBeforeTurn:
		cfg, tr, err := s.BeforeTurn(ctx, in.TurnContext(), in.Clock())
		if cfg == nil {
			return nil, tr, err
		}
		return cfg, tr, err
	case policy.HookBeforeStep:
		cfg, tr, err := s.BeforeStep(ctx, in.StepContext(), in.Clock())
		if cfg == nil {
			return nil, tr, err
		}
		return cfg, tr, err
	case policy.HookBeforePersist:
		if in.Message == nil {
			return nil, Trace{}, errNoMessage
		}
		p, tr, err := s.BeforePersist(ctx, in.Identity(), in.Message, in.Clock())
		if p == nil {
			return nil, tr, err
		}
		return p, tr, err
	case policy.HookOnChatError:
		if in.Error == nil {
			return nil, Trace{}, errNoError
		}
		d, tr, err := s.OnChatError(ctx, in.ChatErrorContext(), in.Clock())
		if d == nil {
			return nil, tr, err
		}
		return d, tr, err
	}
	return nil, Trace{}, fmt.Errorf("evaluating rules: hook %q is not beforeTurn, beforeStep, beforePersist or onChatError", hook)
}

// Fields renders the fields a config from Eval sets as JSON-ready values
// (toolChoice as "auto" or {"type": "tool", "toolName": …}), for printing
// and for comparing with a test's expectations.
func Fields(cfg any) map[string]any {
	if cfg == nil {
		return nil
	}
	if p, ok := cfg.(*Persisted); ok {
		return configFields(struct {
			Message engine.UIMessage `json:"message"`
			Masked  int              `json:"masked"`
		}{p.Message, p.Masked})
	}
	return configFields(cfg)
}
