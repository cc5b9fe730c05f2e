package anthropic

import (
	"github.com/turngate/turngate/engine"
)

// ephemeral is the cache_control of a prompt caching breakpoint.
var ephemeral = map[string]any{"type": "ephemeral"}

// cachedSystem returns the system prompt as a list of text blocks when the
// request brings the blocks it was assembled from and asks for caching: a
// cache_control breakpoint ends every block marked Cache (the static
// context blocks, the whole system prompt with the compaction summary).
// System messages among the messages follow as blocks of their own.
func cachedSystem(req *engine.ModelRequest) ([]any, bool) {
	if !req.CachePrompt || len(req.SystemBlocks) == 0 {
		return nil, false
	}
	out := make([]any, 0, len(req.SystemBlocks))
	for _, sb := range req.SystemBlocks {
		if sb.Text == "" {
			continue
		}
		block := map[string]any{"type": "text", "text": sb.Text}
		if sb.Cache {
			block["cache_control"] = ephemeral
		}
		out = append(out, block)
	}
	for _, m := range req.Messages {
		if m.Role == engine.RoleSystem {
			out = append(out, map[string]any{"type": "text", "text": m.Text()})
		}
	}
	return out, len(out) > 0
}

// cacheConversation puts a breakpoint on the last block of the last turn,
// so the next step (and the next turn) reads the conversation so far from
// the cache. Thinking blocks cannot carry one; such a turn is left as is.
func cacheConversation(turns []any) {
	if len(turns) == 0 {
		return
	}
	blocks, _ := turns[len(turns)-1].(map[string]any)["content"].([]any)
	if len(blocks) == 0 {
		return
	}
	last, _ := blocks[len(blocks)-1].(map[string]any)
	switch last["type"] {
	case "text", "tool_result", "tool_use":
		last["cache_control"] = ephemeral
	}
}
