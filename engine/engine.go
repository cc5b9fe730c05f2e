package engine

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Options configures an Engine. Zero values mean the documented defaults.
type Options struct {
	// Models resolves model names to providers. Required.
	Models ModelResolver
	// Logger receives engine logs (observation-hook panics, retries).
	Logger *slog.Logger
	// ToolTimeout bounds a tool execution when the tool sets none (default 60s).
	ToolTimeout time.Duration
	// MaxOutputBytes bounds a tool output when the tool sets none (default 64 KiB).
	MaxOutputBytes int
	// MaxConcurrentTools caps concurrent tool executions per turn (default 8).
	MaxConcurrentTools int
	// RetryBaseDelay is the first retry backoff for upstream failures (default 500ms).
	RetryBaseDelay time.Duration
	// DefaultMaxRetries applies when no TurnConfig sets maxRetries (default 2).
	DefaultMaxRetries int
	// Tracer, when set, traces every turn: spans per turn, step, model
	// call and tool call with the GenAI semantic conventions (trace.go).
	// Nil means no tracing, at no cost.
	Tracer trace.Tracer
}

// Engine runs turns. It is safe for concurrent use; each Run is one turn.
// It compiles each distinct JSON Schema (tool inputs, structured output)
// once and keeps it for later turns.
type Engine struct {
	opts    Options
	schemas schemaCache
}

// New returns an Engine with opts, defaults applied.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ToolTimeout == 0 {
		opts.ToolTimeout = 60 * time.Second
	}
	if opts.MaxOutputBytes == 0 {
		opts.MaxOutputBytes = 64 << 10
	}
	if opts.MaxConcurrentTools == 0 {
		opts.MaxConcurrentTools = 8
	}
	if opts.RetryBaseDelay == 0 {
		opts.RetryBaseDelay = 500 * time.Millisecond
	}
	if opts.DefaultMaxRetries == 0 {
		opts.DefaultMaxRetries = 2
	}
	return &Engine{opts: opts}
}

// Run runs one turn to its end and returns how it ended. It never returns
// an error: failures are a TurnResult with StatusError, after onChatError.
// Cancelling ctx aborts the turn (StatusAborted) with the partial message.
//
// Events: `start` first (with the message id), then per model step
// `start-step` … `finish-step`, and `finish` last. A failure at any stage
// emits `error` (then `finish-step` if a step was open) and `finish` with
// finishReason "error", as the AI SDK server does. An abort emits `abort`
// and nothing after it, as the AI SDK server does (protocols.md A.11).
//
// Hooks.OnChatResponse fires exactly once at the end of every Run, after the
// last event, whatever the status — including setup failures (unknown model,
// beforeTurn error), where Message is the empty (or continued) message and
// Steps is 0. Hooks.OnChatError fires once for a failure that ends the turn
// and once for every tool or policy failure that becomes a tool error.
func (e *Engine) Run(ctx context.Context, req *TurnRequest) *TurnResult {
	t := newTurn(e, req)
	ctx = t.startTrace(ctx)
	t.live = ctx
	t.emitStart()
	if err := t.setup(ctx); err != nil {
		if ctx.Err() != nil {
			t.abort()
		} else {
			t.fail(ctx, StageSetup, err)
		}
		return t.end(ctx)
	}
	runCtx := ctx
	if t.timeout.TotalMs > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, time.Duration(t.timeout.TotalMs)*time.Millisecond, errTotalTimeout)
		defer cancel()
		t.live = runCtx
	}
	t.loop(ctx, runCtx)
	return t.end(ctx)
}
