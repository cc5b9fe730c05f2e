package engine

import (
	"context"
	"errors"
	"fmt"
)

// ToolKindContext is the kind of the tools the gateway provides from an
// agent's session configuration (update_context, search_history): ordinary
// tools to the rules, told apart by this kind.
const ToolKindContext = "context"

// SessionInfo is what an agent's session configuration adds to a turn
// (TurnRequest.Session): the context blocks the system prompt was built
// from, the compaction state of the conversation and the means to compact
// it again when the upstream reports a context overflow.
type SessionInfo struct {
	// Context maps each context block's name to its rendered content
	// (TurnContext.Context).
	Context map[string]string
	// SystemBlocks are the parts TurnRequest.System was assembled from,
	// in order; a provider that takes a list of system blocks (Anthropic)
	// sends them apart, so cache breakpoints can sit between them.
	SystemBlocks []SystemBlock
	// CachePrompt asks providers for cache-friendly requests: Anthropic
	// cache_control breakpoints on the system blocks marked Cache and on the
	// last message.
	CachePrompt bool
	// Summary is the compaction summary that replaces the older part of
	// the conversation ("" when it is not compacted).
	Summary string
	// Compactor, when set, compacts the conversation once when the
	// upstream rejects a step for overflowing the model's context window,
	// and the step is retried (reactive compaction).
	Compactor Compactor
}

// SystemBlock is one part of an assembled system prompt.
type SystemBlock struct {
	Text string `json:"text"`
	// Cache marks the end of a prefix worth caching (an Anthropic
	// cache_control breakpoint when SessionInfo.CachePrompt is set).
	Cache bool `json:"cache,omitempty"`
}

// Compactor shrinks a turn's conversation after a context overflow.
type Compactor interface {
	// Compact returns the system prompt and messages to send instead of
	// system and messages: a summary of the older messages in the system
	// prompt, the recent ones kept verbatim. The blocks are the new
	// system's parts (SessionInfo.SystemBlocks).
	Compact(ctx context.Context, system string, messages []ModelMessage) (newSystem string, blocks []SystemBlock, newMessages []ModelMessage, err error)
}

// Models returns the engine's model resolver (Options.Models).
func (e *Engine) Models() ModelResolver { return e.opts.Models }

// IsContextOverflow reports whether err is an upstream rejection of a
// request that does not fit the model's context window.
func IsContextOverflow(err error) bool {
	var ue *UpstreamError
	return errors.As(err, &ue) && ue.ContextOverflow
}

// systemBlocks returns the blocks of the turn's system prompt for a step
// whose system prompt is system: the session's blocks when no rule
// replaced the assembled prompt, nil otherwise (the provider then sends
// system as one block).
func (t *turn) systemBlocks(system string) []SystemBlock {
	s := t.req.Session
	if s == nil || len(s.SystemBlocks) == 0 || system != t.req.System {
		return nil
	}
	return s.SystemBlocks
}

// compactAfterOverflow runs the session's Compactor once per turn after
// the upstream rejected req for overflowing the context window, and
// replaces req's (and the turn's, when the step sent the turn's own)
// system prompt and messages. It reports whether the step may be retried.
func (t *turn) compactAfterOverflow(ctx context.Context, req *ModelRequest, err error) (bool, error) {
	s := t.req.Session
	if s == nil || s.Compactor == nil || t.compactedOnce || !IsContextOverflow(err) {
		return false, nil
	}
	t.compactedOnce = true
	system, blocks, msgs, cerr := s.Compactor.Compact(ctx, req.System, req.Messages)
	if cerr != nil {
		return false, fmt.Errorf("compacting after a context overflow: %w", cerr)
	}
	sameSystem := req.System == t.system
	sameMessages := len(req.Messages) == len(t.messages)
	req.System, req.SystemBlocks, req.Messages = system, blocks, msgs
	if sameSystem {
		t.system = system
		t.req.System = system
		s.SystemBlocks = blocks
	}
	if sameMessages {
		t.messages = msgs
	}
	t.log.Info("engine: compacted the conversation after a context overflow", "requestId", t.req.RequestID, "messages", len(msgs))
	return true, nil
}
