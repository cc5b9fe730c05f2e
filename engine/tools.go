package engine

import (
	"context"
	"encoding/json"
	"time"
)

// Tool kinds: how a tool is executed. Rules see the kind in every tool call.
const (
	ToolKindHTTP    = "http"
	ToolKindMCP     = "mcp"
	ToolKindAgent   = "agent"
	ToolKindClient  = "client"
	ToolKindBuiltin = "builtin"
)

// ToolInfo is the serialisable description of a tool: what the model is
// offered and what rules see.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Kind is one of the ToolKind constants.
	Kind string `json:"kind"`
	// Server names the MCP server (or sub-agent) behind the tool, if any.
	Server string `json:"server,omitempty"`
	// Dynamic marks a runtime-registered tool (AI SDK "dynamic-tool" parts).
	Dynamic bool `json:"dynamic,omitempty"`
}

// Tool is a tool the engine can offer to the model. A tool whose Executor is
// nil is a client tool: the turn ends with the call pending and the client
// supplies the result.
type Tool struct {
	ToolInfo
	// Executor runs the tool; nil for client tools.
	Executor Executor `json:"-"`
	// Timeout bounds one execution; zero means the engine default.
	Timeout time.Duration `json:"-"`
	// MaxOutputBytes bounds the output the model sees; zero means the engine
	// default. Longer outputs are truncated with a visible marker.
	MaxOutputBytes int `json:"-"`
}

// ToolExecution is what an Executor receives: the effective input (after
// any rewrite by beforeToolCall) and the call's identity.
type ToolExecution struct {
	Identity
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	StepNumber int
	Messages   []ModelMessage
	// IdempotencyKey is the same for every execution of this call of this
	// turn, on any replica and after a crash (see IdempotencyKey); an HTTP
	// tool sends it as the Idempotency-Key header.
	IdempotencyKey string
}

// Executor runs one tool call. A returned error becomes a tool error the
// model sees (success: false); it never ends the turn. Implementations must
// honour ctx cancellation.
type Executor interface {
	Execute(ctx context.Context, call ToolExecution) (json.RawMessage, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, call ToolExecution) (json.RawMessage, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, call ToolExecution) (json.RawMessage, error) {
	return f(ctx, call)
}
