package agenttool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/turngate/turngate/engine"
)

// EngineRunner is a Runner that runs sub-agent turns on an Engine.
type EngineRunner struct {
	// Engine runs the turns.
	Engine *engine.Engine
	// Template returns the turn request template of the named agent: its
	// model, system prompt, tools, defaults, hooks (its own rules) and,
	// optionally, its earlier messages and Emit.
	Template func(agent string) (engine.TurnRequest, error)
	// Prepare, when not nil, completes each sub-agent turn once its
	// identity and prompt are set, before it runs: the gateway applies
	// the sub-agent's session configuration (the system prompt assembled
	// from its context blocks) there. Its error fails the call.
	Prepare func(ctx context.Context, turn *engine.TurnRequest) error
}

// RunSubAgent runs the turn newTurn makes of req's agent's template on
// r.Engine, prepared by r.Prepare. Cancelling ctx aborts the turn. The
// result is TurnOutput's.
func (r *EngineRunner) RunSubAgent(ctx context.Context, req Request) (json.RawMessage, error) {
	tmpl, err := r.Template(req.Agent)
	if err != nil {
		return nil, fmt.Errorf("loading agent: %w", err)
	}
	turn := newTurn(tmpl, req)
	if r.Prepare != nil {
		if err := r.Prepare(ctx, &turn); err != nil {
			return nil, fmt.Errorf("preparing the turn: %w", err)
		}
	}
	res := r.Engine.Run(ctx, &turn)
	if err := ctx.Err(); err != nil && res.Status == engine.StatusAborted {
		return nil, fmt.Errorf("turn aborted: %w", err)
	}
	return TurnOutput(res)
}

// newTurn returns the sub-agent turn of req: tmpl with the sub-agent's
// identity (entry path subAgent, the parent's depth plus one, the session
// SessionID(req.Parent, req.ToolCallID), the parent's request id and
// principal) and one more user message, Prompt(req.Input).
func newTurn(tmpl engine.TurnRequest, req Request) engine.TurnRequest {
	turn := tmpl
	turn.Identity = engine.Identity{
		RequestID: req.Parent.RequestID,
		SessionID: SessionID(req.Parent, req.ToolCallID),
		Agent:     req.Agent,
		Principal: req.Parent.Principal,
		EntryPath: engine.EntrySubAgent,
		Depth:     req.Parent.Depth + 1,
	}
	turn.Messages = append(slices.Clip(tmpl.Messages), engine.UIMessage{
		ID:    uuid.NewString(),
		Role:  engine.RoleUser,
		Parts: []engine.UIPart{{Type: engine.PartText, Text: Prompt(req.Input)}},
	})
	turn.Continuation = false
	turn.MessageID = ""
	return turn
}

// SessionID derives a sub-agent turn's session id from its parent's
// session and tool call, so that each call gets a fresh session and its
// records can be traced to the parent.
func SessionID(parent engine.Identity, toolCallID string) string {
	return parent.SessionID + ":" + toolCallID
}

// Prompt returns the user message for a sub-agent's input: its "prompt"
// string if it has one, otherwise the input's JSON text (for tools with
// their own input schema).
func Prompt(input json.RawMessage) string {
	var in struct {
		Prompt *string `json:"prompt"`
	}
	if json.Unmarshal(input, &in) == nil && in.Prompt != nil {
		return *in.Prompt
	}
	return string(input)
}

// TurnOutput maps a sub-agent's turn result to the tool's output: the
// structured output if the turn produced one, otherwise the last step's
// text as a JSON string. A turn that failed, was aborted, or stopped on
// client tool calls (which a sub-agent cannot hand to anyone) is an error,
// an engine.PublicError: a failed turn's res.Error is already the text its
// own client would see.
func TurnOutput(res *engine.TurnResult) (json.RawMessage, error) {
	switch {
	case res.Status == engine.StatusError:
		msg := res.Error
		if msg == "" {
			msg = "unknown error"
		}
		return nil, engine.PublicError("turn failed: "+msg, nil)
	case res.Status == engine.StatusAborted:
		return nil, engine.PublicError("turn aborted", nil)
	case len(res.PendingToolCalls) > 0:
		return nil, engine.PublicError(fmt.Sprintf("turn stopped on client tool call %q, which a sub-agent cannot run", res.PendingToolCalls[0].ToolName), nil)
	case len(res.Output) > 0:
		return res.Output, nil
	}
	return json.Marshal(lastText(res))
}

// lastText returns the text of the last step that has text, or of the
// message's last text part when no step records any.
func lastText(res *engine.TurnResult) string {
	for _, s := range slices.Backward(res.Steps) {
		if s.Text != "" {
			return s.Text
		}
	}
	for _, p := range slices.Backward(res.Message.Parts) {
		if p.Type == engine.PartText && p.Text != "" {
			return p.Text
		}
	}
	return ""
}
