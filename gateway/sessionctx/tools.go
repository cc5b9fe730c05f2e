package sessionctx

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// UpdateToolName is the tool the model updates writable blocks with.
const UpdateToolName = "update_context"

// updateInput is the update_context tool's input.
type updateInput struct {
	Block   string `json:"block"`
	Content string `json:"content"`
}

// updateTool returns the update_context tool when the agent has writable
// blocks. Its input schema names them; a content over the block's
// maxTokens is a tool error the model sees, and nothing is stored.
func (a *Agent) updateTool() (engine.Tool, bool) {
	var names []string
	var lines []string
	for _, b := range a.cfg.Context {
		if b.Writable {
			names = append(names, b.Name)
			line := fmt.Sprintf("%s (at most %d tokens)", b.Name, b.MaxTokens)
			if b.Description != "" {
				line += ": " + strings.TrimRight(b.Description, ".")
			}
			lines = append(lines, line)
		}
	}
	if len(names) == 0 {
		return engine.Tool{}, false
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"block":   map[string]any{"type": "string", "enum": names, "description": "the writable context block to replace"},
			"content": map[string]any{"type": "string", "description": "the block's whole new content"},
		},
		"required":             []string{"block", "content"},
		"additionalProperties": false,
	})
	return engine.Tool{
		ToolInfo: engine.ToolInfo{
			Name: UpdateToolName, Kind: engine.ToolKindContext, InputSchema: schema,
			Description: "Replace the whole content of a writable block of your context; it is shown in your system prompt from the next turn on. Blocks: " +
				strings.Join(lines, "; ") + ".",
		},
		Executor: engine.ExecutorFunc(a.update),
	}, true
}

// update runs one update_context call: the input is the one the rules
// allowed (or patched). Its errors about the input are the model's to
// correct (engine.PublicError); a store failure shows a generic text.
func (a *Agent) update(ctx context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	var in updateInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, engine.PublicError(UpdateToolName+": input must be {block, content}", err)
	}
	i := slices.IndexFunc(a.cfg.Context, func(b config.ContextBlock) bool { return b.Name == in.Block && b.Writable })
	if i < 0 {
		return nil, engine.PublicError(fmt.Sprintf("%s: %q is not a writable context block", UpdateToolName, in.Block), nil)
	}
	b := &a.cfg.Context[i]
	if n := estimateTokens(in.Content); n > b.MaxTokens {
		return nil, engine.PublicError(fmt.Sprintf("%s: the content is about %d tokens, over the %d block %q may hold; write a shorter content", UpdateToolName, n, b.MaxTokens, b.Name), nil)
	}
	if err := a.deps.Store.PutContextBlock(ctx, call.Principal.Tenant, call.SessionID, b.Name, in.Content); err != nil {
		return nil, fmt.Errorf("%s: the block was not stored: %w", UpdateToolName, err)
	}
	return json.Marshal(map[string]any{"block": b.Name, "stored": true, "tokens": estimateTokens(in.Content)})
}
