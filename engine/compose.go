package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
)

// Compose returns Hooks that dispatch to hooks in order, like the
// reference's extensions: the primary first, then the others in load order.
// Nil entries are skipped.
//
//   - BeforeTurn and BeforeStep: every hook runs; results merge in order (a
//     later scalar wins; tools and stopWhen are additive; headers and
//     providerOptions are shallow-merged). Later hooks see the model, system
//     and messages chosen by earlier ones. The first error stops dispatch.
//   - BeforeToolCall: hooks run in order; the first block or substitute wins
//     and ends dispatch; an allow with input rewrites the input later hooks
//     see, and the last rewrite is the result. The first error stops dispatch.
//   - ToolResult: chained; each hook sees the output as replaced by earlier
//     ones. The first error stops dispatch.
//   - Observation hooks: every hook is called; a panic in one is recovered
//     and logged with slog.Default and never stops the others.
//   - OnChatError: chained; each hook sees the error as replaced by earlier
//     ones; the last replacement wins.
//
// A panic in a decision hook becomes that hook's error (fail closed).
func Compose(hooks ...Hooks) Hooks {
	var c composed
	for _, h := range hooks {
		if h != nil {
			c = append(c, h)
		}
	}
	switch len(c) {
	case 0:
		return NopHooks{}
	case 1:
		return c[0]
	}
	return c
}

type composed []Hooks

func (c composed) BeforeTurn(ctx context.Context, tc *TurnContext) (*TurnConfig, error) {
	return chain(ctx, c, *tc, callBeforeTurn, mergeTurnConfig, func(view *TurnContext, cfg *TurnConfig) {
		use(&view.Model, cfg.Model)
		use(&view.System, cfg.System)
		use(&view.Messages, cfg.Messages)
	})
}

func (c composed) BeforeStep(ctx context.Context, sc *PrepareStepContext) (*StepConfig, error) {
	return chain(ctx, c, *sc, callBeforeStep, mergeStepConfig, func(view *PrepareStepContext, cfg *StepConfig) {
		use(&view.Model, cfg.Model)
		use(&view.System, cfg.System)
		use(&view.Messages, cfg.Messages)
		use(&view.ActiveTools, cfg.ActiveTools)
	})
}

// chain dispatches a configuration hook (beforeTurn, beforeStep) to every
// member in order: each sees view as updated by the earlier results (see),
// and the results are merged in order into one (nil if none).
func chain[C, R any](ctx context.Context, c composed, view C, call func(context.Context, Hooks, *C) (*R, error),
	merge func(acc, r *R), see func(view *C, r *R)) (*R, error) {
	var acc *R
	for _, h := range c {
		r, err := call(ctx, h, &view)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		if acc == nil {
			acc = new(R)
		}
		merge(acc, r)
		see(&view, r)
	}
	return acc, nil
}

// use sets *dst to *src when src is set.
func use[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

func (c composed) BeforeToolCall(ctx context.Context, tc *ToolCallContext) (*ToolCallDecision, error) {
	var rewrite, approval *ToolCallDecision
	view := *tc
	for _, h := range c {
		d, err := callBeforeToolCall(ctx, h, &view)
		if err != nil {
			return nil, err
		}
		if d == nil {
			continue
		}
		switch d.Action {
		case ActionBlock, ActionSubstitute:
			return d, nil
		case ActionAllow, ActionApproval:
			if len(d.Input) > 0 {
				rewrite = d
				view.Input = d.Input
			}
			if d.Action == ActionApproval {
				// A later hook's block or substitute still wins; its
				// patches change the input that would run.
				approval = mergeApproval(approval, d)
			}
		default:
			return d, nil // the engine rejects unknown actions
		}
	}
	if approval != nil {
		if rewrite != nil {
			approval.Input = view.Input
		}
		return approval, nil
	}
	return rewrite, nil
}

func (c composed) ToolResult(ctx context.Context, rc *ToolCallResultContext) (*ToolResultDecision, error) {
	var last *ToolResultDecision
	view := *rc
	for _, h := range c {
		d, err := callToolResult(ctx, h, &view)
		if err != nil {
			return nil, err
		}
		if d != nil {
			last = d
			view.Output = d.Output
		}
	}
	return last, nil
}

func (c composed) AfterToolCall(ctx context.Context, rc *ToolCallResultContext) {
	c.observe("afterToolCall", func(h Hooks) { h.AfterToolCall(ctx, rc) })
}

func (c composed) OnStepFinish(ctx context.Context, s *StepResult) {
	c.observe("onStepFinish", func(h Hooks) { h.OnStepFinish(ctx, s) })
}

func (c composed) OnChunk(ctx context.Context, ch *ChunkContext) {
	c.observe("onChunk", func(h Hooks) { h.OnChunk(ctx, ch) })
}

func (c composed) OnChatResponse(ctx context.Context, r *ChatResponseResult) {
	c.observe("onChatResponse", func(h Hooks) { h.OnChatResponse(ctx, r) })
}

func (c composed) OnChatError(ctx context.Context, e *ChatErrorContext) error {
	var replaced error
	view := *e
	for _, h := range c {
		func() {
			defer recoverObservation(slog.Default(), "onChatError")
			if r := h.OnChatError(ctx, &view); r != nil {
				replaced = r
				view.Err = r
				view.Message = r.Error()
			}
		}()
	}
	return replaced
}

// observe calls each member's observation hook in order; a panic in one is
// logged and the others still run.
func (c composed) observe(hook string, call func(Hooks)) {
	for _, h := range c {
		func() {
			defer recoverObservation(slog.Default(), hook)
			call(h)
		}()
	}
}

// recoverObservation recovers a panic in an observation hook and logs it.
// It must be deferred directly.
func recoverObservation(log *slog.Logger, hook string) {
	if r := recover(); r != nil {
		log.Error("engine: observation hook panicked", "hook", hook, "panic", fmt.Sprint(r))
	}
}

// callDecision calls one decision hook through the method expression f,
// turning a panic into an error that names the hook: a broken hook fails
// its decision (closed), never the process.
func callDecision[C, R any](ctx context.Context, h Hooks, c *C, hook string, f func(Hooks, context.Context, *C) (*R, error)) (r *R, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%s hook panicked: %v", hook, p)
		}
	}()
	return f(h, ctx, c)
}

func callBeforeTurn(ctx context.Context, h Hooks, tc *TurnContext) (*TurnConfig, error) {
	return callDecision(ctx, h, tc, "beforeTurn", Hooks.BeforeTurn)
}

func callBeforeStep(ctx context.Context, h Hooks, sc *PrepareStepContext) (*StepConfig, error) {
	return callDecision(ctx, h, sc, "beforeStep", Hooks.BeforeStep)
}

func callBeforeToolCall(ctx context.Context, h Hooks, tc *ToolCallContext) (*ToolCallDecision, error) {
	return callDecision(ctx, h, tc, "beforeToolCall", Hooks.BeforeToolCall)
}

func callToolResult(ctx context.Context, h Hooks, rc *ToolCallResultContext) (*ToolResultDecision, error) {
	return callDecision(ctx, h, rc, "toolResult", Hooks.ToolResult)
}

// mergeTurnConfig applies src on top of dst: set scalars replace, tools and
// stopWhen are appended (a later tool of the same name replaces an earlier
// one when the engine builds the tool set), headers and providerOptions are
// shallow-merged.
func mergeTurnConfig(dst, src *TurnConfig) {
	setIf(&dst.Model, src.Model)
	setIf(&dst.System, src.System)
	setIf(&dst.Messages, src.Messages)
	dst.Tools = append(dst.Tools, src.Tools...)
	setIf(&dst.ActiveTools, src.ActiveTools)
	setIf(&dst.ToolChoice, src.ToolChoice)
	setIf(&dst.MaxSteps, src.MaxSteps)
	dst.StopWhen = append(dst.StopWhen, src.StopWhen...)
	setIf(&dst.SendReasoning, src.SendReasoning)
	setIf(&dst.Refuse, src.Refuse)
	setIf(&dst.MaxOutputTokens, src.MaxOutputTokens)
	setIf(&dst.Temperature, src.Temperature)
	setIf(&dst.TopP, src.TopP)
	setIf(&dst.TopK, src.TopK)
	setIf(&dst.PresencePenalty, src.PresencePenalty)
	setIf(&dst.FrequencyPenalty, src.FrequencyPenalty)
	setIf(&dst.StopSequences, src.StopSequences)
	setIf(&dst.Seed, src.Seed)
	setIf(&dst.MaxRetries, src.MaxRetries)
	setIf(&dst.Timeout, src.Timeout)
	setIf(&dst.Telemetry, src.Telemetry)
	dst.Headers = mergeMap(dst.Headers, src.Headers)
	dst.ProviderOptions = mergeMap(dst.ProviderOptions, src.ProviderOptions)
	setIf(&dst.Output, src.Output)
}

// mergeStepConfig applies src on top of dst like mergeTurnConfig.
func mergeStepConfig(dst, src *StepConfig) {
	setIf(&dst.Model, src.Model)
	setIf(&dst.ToolChoice, src.ToolChoice)
	setIf(&dst.ActiveTools, src.ActiveTools)
	setIf(&dst.System, src.System)
	setIf(&dst.Messages, src.Messages)
	dst.ProviderOptions = mergeMap(dst.ProviderOptions, src.ProviderOptions)
}

func setIf[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

// mergeMap returns a new map holding dst's entries overwritten by src's;
// it never mutates its arguments, which may belong to a hook.
func mergeMap[V any](dst, src map[string]V) map[string]V {
	if len(src) == 0 {
		return dst
	}
	out := make(map[string]V, len(dst)+len(src))
	maps.Copy(out, dst)
	maps.Copy(out, src)
	return out
}
