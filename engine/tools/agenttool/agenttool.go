// Package agenttool runs another configured agent's full turn as a tool: a
// sub-agent, entered through the subAgent entry path with its own hooks and
// rules. Sub-agents nest up to a depth limit and are cancelled with their
// parent's tool call.
package agenttool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turngate/turngate/engine"
)

// DefaultMaxDepth is the nesting limit when a tool sets none: a sub-agent
// may call a sub-agent that may call one more, which keeps a runaway
// delegation loop from multiplying model calls.
const DefaultMaxDepth = 3

// DefaultInputSchema is a sub-agent tool's input schema when the tool
// declares none: a prompt for the sub-agent.
var DefaultInputSchema = json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The task for the sub-agent, with everything it needs to know."}},"required":["prompt"]}`)

// Config is an agent tool's runner configuration (the `agent:` block of a
// tool).
type Config struct {
	// Agent names the configured agent that runs the call.
	Agent string `yaml:"agent"`
	// MaxDepth is the deepest nesting allowed for the sub-agent's turn
	// (top-level turns are depth 0); zero means DefaultMaxDepth.
	MaxDepth int `yaml:"maxDepth"`
}

// Request is one sub-agent run.
type Request struct {
	// Parent is the identity of the turn whose tool call runs the sub-agent.
	Parent engine.Identity
	// ToolCallID is the parent's tool call.
	ToolCallID string
	// Agent names the sub-agent.
	Agent string
	// Input is the tool call's input (by default {"prompt": "..."}).
	Input json.RawMessage
}

// Runner runs a sub-agent's turn. The gateway implements it (it owns
// sessions and agent definitions); EngineRunner is one implementation. A
// Runner must stop when ctx is cancelled.
type Runner interface {
	RunSubAgent(ctx context.Context, req Request) (json.RawMessage, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, req Request) (json.RawMessage, error)

// RunSubAgent calls f.
func (f RunnerFunc) RunSubAgent(ctx context.Context, req Request) (json.RawMessage, error) {
	return f(ctx, req)
}

// Executor is an engine.Executor that runs a sub-agent.
type Executor struct {
	agent    string
	maxDepth int
	runner   Runner
}

// New returns an Executor for cfg that runs sub-agents through runner.
func New(cfg Config, runner Runner) (*Executor, error) {
	if cfg.Agent == "" {
		return nil, errors.New("agent: required")
	}
	if cfg.MaxDepth < 0 {
		return nil, errors.New("maxDepth: must not be negative")
	}
	if runner == nil {
		return nil, errors.New("no sub-agent runner configured")
	}
	maxDepth := cfg.MaxDepth
	if maxDepth == 0 {
		maxDepth = DefaultMaxDepth
	}
	return &Executor{agent: cfg.Agent, maxDepth: maxDepth, runner: runner}, nil
}

// Execute runs the sub-agent for call, unless its turn would be nested
// deeper than the limit.
func (e *Executor) Execute(ctx context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	if call.Depth+1 > e.maxDepth {
		return nil, engine.PublicError(fmt.Sprintf("sub-agent depth limit %d reached", e.maxDepth), nil)
	}
	out, err := e.runner.RunSubAgent(ctx, Request{
		Parent:     call.Identity,
		ToolCallID: call.ToolCallID,
		Agent:      e.agent,
		Input:      call.Input,
	})
	if err != nil {
		// The parent's model sees the sub-agent's failure when it is
		// written for it (engine.PublicError), a generic text otherwise.
		err = fmt.Errorf("sub-agent %s: %w", e.agent, err)
		if msg, ok := engine.PublicText(err); ok {
			return nil, engine.PublicError(fmt.Sprintf("sub-agent %s: %s", e.agent, msg), err)
		}
		return nil, err
	}
	return out, nil
}
