package engine

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultMaxSteps is the step budget when neither the agent nor a rule sets
// one (Think's default, think-implementation.md §2.12).
const DefaultMaxSteps = 10

// TurnRequest is everything one turn needs. The gateway builds it from the
// stored transcript (never from client-supplied history) and the agent's
// configuration.
type TurnRequest struct {
	Identity
	// Model is the agent's model name, resolved through the ModelResolver.
	Model  string
	System string
	// Session is what the agent's session configuration adds (context
	// blocks, compaction, cached prompts); nil without one.
	Session *SessionInfo
	// Messages is the stored transcript, ending with the new user message,
	// or with the assistant message being continued (Continuation).
	Messages []UIMessage
	// Tools is the agent's merged tool set.
	Tools []Tool
	// ToolLimits bound the turn's tool executions where a tool sets no
	// bound of its own; a zero field means the Engine's option.
	ToolLimits ToolLimits
	// Defaults are the agent's configured TurnConfig defaults (maxSteps,
	// sampling…); beforeTurn overrides apply on top.
	Defaults TurnConfig
	// RequestToolChoice is the client's tool choice (an API request's
	// tool_choice). It applies only where neither Defaults nor beforeTurn
	// set a ToolChoice, and beforeStep's still overrides it: "none" to
	// every step; a choice that forces a call (required, tool) to the
	// turn's first step only, as it forces the one model call of the API —
	// on every step, a forced server tool would run until maxSteps.
	RequestToolChoice *ToolChoice
	// Continuation marks a turn that continues the last assistant message
	// (after client tool results, or continueLastTurn).
	Continuation bool
	// ClientToolResults are the toolCallIds of the continued message whose
	// outputs the client has just supplied — or, on a turn that is not a
	// continuation (a stateless request, whose client sends the whole
	// history), of the history's last assistant message. Before beforeTurn
	// the engine runs the toolResult hook on each (so a redaction changes
	// what the model sees and what is persisted) and reports it to
	// afterToolCall with Decision DecisionClient.
	ClientToolResults []string
	// ApprovalResponses are the decisions on the continued message's
	// tool calls awaiting approval (approval.go), as the gateway verified
	// them: before beforeTurn the engine evaluates beforeToolCall again on
	// each approved call and runs it, or reports the denial.
	ApprovalResponses []ApprovalResponse
	// MessageID is the assistant message id: the continued message's id on
	// continuations, a fresh id otherwise (the engine makes one if empty).
	MessageID string
	// Journal, when set, journals the outcomes of the turn's server tool
	// calls and replays those an earlier run of the turn completed.
	Journal ToolJournal
	// Body is the request's custom body fields (TurnContext.body).
	Body map[string]any
	// Hooks receives the lifecycle hooks; nil means NopHooks.
	Hooks Hooks
	// StepBudget, when set, is asked after each step that leaves the turn
	// going on (tool results for the model to answer), after onStepFinish,
	// whether another model step may run: a non-empty answer stops the
	// turn there, as maxSteps does, and names why in the stop text the
	// client sees ("Stopped after 2 steps (ANSWER)."). The gateway's token
	// budgets use it.
	StepBudget func(ctx context.Context) string
	// Emit receives the UI message stream events in order; nil discards them.
	// It is called from the turn's goroutine and must not block for long.
	Emit func(Event)
	// Flush, when set, is called from the turn's goroutine whenever the
	// turn is about to wait — for the model to open its stream or send its
	// next part, for tools to finish — and once more before Run returns.
	// The events emitted since the previous call then form a batch that
	// nothing more will join soon: a caller that holds Emit's events can
	// hand them on together (one network write instead of one per event)
	// without delaying any of them past a wait. Hooks are not waits: the
	// events of a step's end (tool outputs, finish-step) are held while
	// toolResult, afterToolCall, onStepFinish and the next beforeStep run,
	// so those hooks delay them (Rego by at most its deadline).
	Flush func()
}

// ToolLimits bound a turn's tool executions (TurnRequest.ToolLimits).
type ToolLimits struct {
	// Timeout bounds a tool execution (Options.ToolTimeout).
	Timeout time.Duration
	// MaxOutputBytes bounds a tool output (Options.MaxOutputBytes).
	MaxOutputBytes int
	// MaxConcurrent caps the tool executions running at once
	// (Options.MaxConcurrentTools).
	MaxConcurrent int
}

// TurnResult is how a turn ended.
type TurnResult struct {
	// Message is the assistant message to persist: the whole continued
	// message on continuations, the partial one on error or abort.
	Message UIMessage `json:"message"`
	// Status is StatusCompleted, StatusError or StatusAborted.
	Status string `json:"status"`
	// Error is the client-visible error text (masked unless onChatError
	// replaced it) when Status is StatusError.
	Error string `json:"error,omitempty"`
	// ErrorClass is the failure's error class (ClassifyError, one of the
	// Class constants) when Status is StatusError.
	ErrorClass   string       `json:"errorClass,omitempty"`
	FinishReason string       `json:"finishReason"`
	Steps        []StepResult `json:"steps"`
	Usage        Usage        `json:"usage"`
	// Output is the parsed structured output when TurnConfig.Output was set.
	Output json.RawMessage `json:"output,omitempty"`
	// PendingToolCalls are client tool calls awaiting the client's result.
	PendingToolCalls []ToolCall `json:"pendingToolCalls,omitempty"`
	// PendingApprovals are tool calls awaiting a person's approval.
	PendingApprovals []PendingApproval `json:"pendingApprovals,omitempty"`
	// Continuation echoes the request.
	Continuation bool `json:"continuation"`
}
