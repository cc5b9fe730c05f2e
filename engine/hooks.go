package engine

import "context"

// Hooks receives the turn's lifecycle hooks. policy/ implements the decision
// hooks with rules; the gateway adds observers (audit, metrics). Embed
// NopHooks to implement only some of them.
//
// Decision hooks (BeforeTurn, BeforeStep, BeforeToolCall, ToolResult) may
// return overrides; a nil result means "no change". Observation hooks never
// change the turn; a panic in one is recovered and logged.
type Hooks interface {
	// BeforeTurn fires once, before the first step. An error fails the
	// turn at the setup stage.
	BeforeTurn(ctx context.Context, tc *TurnContext) (*TurnConfig, error)
	// BeforeStep fires before each model step. An error (or panic) fails
	// the turn at the policy stage; a Model override that the
	// ModelResolver cannot resolve fails it at the setup stage, like an
	// unknown model in the turn's configuration.
	BeforeStep(ctx context.Context, sc *PrepareStepContext) (*StepConfig, error)
	// BeforeToolCall fires for every tool call, server or client, in call
	// order, before any of the step's calls execute. An error becomes a
	// tool error the model sees (fail closed); the turn goes on.
	BeforeToolCall(ctx context.Context, tc *ToolCallContext) (*ToolCallDecision, error)
	// ToolResult may replace the output the model sees after a tool ran
	// (redaction). An error becomes a tool error (fail closed).
	ToolResult(ctx context.Context, rc *ToolCallResultContext) (*ToolResultDecision, error)
	// AfterToolCall observes each call's outcome, in call order.
	AfterToolCall(ctx context.Context, rc *ToolCallResultContext)
	// OnStepFinish observes each finished step.
	OnStepFinish(ctx context.Context, s *StepResult)
	// OnChunk observes each model stream part. It is on the hot path.
	OnChunk(ctx context.Context, c *ChunkContext)
	// OnChatResponse observes the end of every turn, exactly once, after
	// the turn's last event: completed, error (setup failures included) and
	// aborted turns alike.
	OnChatResponse(ctx context.Context, r *ChatResponseResult)
	// OnChatError is consulted for every failure; the returned error's text
	// replaces the client-visible error text. Returning nil keeps the
	// engine's masked default.
	OnChatError(ctx context.Context, e *ChatErrorContext) error
}

// NopHooks implements Hooks with no effect. Embed it to override only the
// hooks you need.
type NopHooks struct{}

// BeforeTurn returns no overrides.
func (NopHooks) BeforeTurn(context.Context, *TurnContext) (*TurnConfig, error) { return nil, nil }

// BeforeStep returns no overrides.
func (NopHooks) BeforeStep(context.Context, *PrepareStepContext) (*StepConfig, error) {
	return nil, nil
}

// BeforeToolCall allows the call unchanged.
func (NopHooks) BeforeToolCall(context.Context, *ToolCallContext) (*ToolCallDecision, error) {
	return nil, nil
}

// ToolResult leaves the output unchanged.
func (NopHooks) ToolResult(context.Context, *ToolCallResultContext) (*ToolResultDecision, error) {
	return nil, nil
}

// AfterToolCall does nothing.
func (NopHooks) AfterToolCall(context.Context, *ToolCallResultContext) {}

// OnStepFinish does nothing.
func (NopHooks) OnStepFinish(context.Context, *StepResult) {}

// OnChunk does nothing.
func (NopHooks) OnChunk(context.Context, *ChunkContext) {}

// OnChatResponse does nothing.
func (NopHooks) OnChatResponse(context.Context, *ChatResponseResult) {}

// OnChatError keeps the default error text.
func (NopHooks) OnChatError(context.Context, *ChatErrorContext) error { return nil }
