package engine

import "context"

// The engine calls every observation hook through these wrappers, so a
// panicking hook is logged and never aborts the turn.

func (t *turn) callOnChunk(ctx context.Context, p StreamPart) {
	defer recoverObservation(t.log, "onChunk")
	t.chunk.Chunk = p
	t.hooks.OnChunk(ctx, &t.chunk)
}

func (t *turn) callOnStepFinish(ctx context.Context, s *StepResult) {
	defer recoverObservation(t.log, "onStepFinish")
	t.hooks.OnStepFinish(ctx, s)
}

func (t *turn) callAfterToolCall(ctx context.Context, rc *ToolCallResultContext) {
	defer recoverObservation(t.log, "afterToolCall")
	t.hooks.AfterToolCall(ctx, rc)
}

func (t *turn) callOnChatResponse(ctx context.Context, r *ChatResponseResult) {
	defer recoverObservation(t.log, "onChatResponse")
	t.hooks.OnChatResponse(ctx, r)
}

func (t *turn) callOnChatError(ctx context.Context, e *ChatErrorContext) (replaced error) {
	defer recoverObservation(t.log, "onChatError")
	return t.hooks.OnChatError(ctx, e)
}
