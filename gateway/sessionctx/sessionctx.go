// Package sessionctx is an agent's session configuration at work (the
// reference's configureSession as configuration): it assembles a turn's
// system prompt from the agent's context blocks (inline text, a file, an
// HTTP source, a block the model writes through the update_context tool),
// compacts a long conversation into a stored summary plus its recent
// messages, and marks the prompt's cacheable prefix.
package sessionctx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/sameorigin"
)

// Deps are what an Agent needs from the gateway.
type Deps struct {
	// Store keeps writable blocks, summaries and usage per session.
	Store store.SessionMemory
	// Models resolves the compaction model alias.
	Models engine.ModelResolver
	// HTTP fetches http blocks; nil means http.DefaultClient (each fetch
	// is bounded by its block's timeout). Whatever the client, a block's
	// redirects are followed only on its URL's origin (sameorigin), so its
	// headers never reach another host.
	HTTP *http.Client
	// Log receives the causes of failed sources.
	Log *slog.Logger
	// OnCompaction, when set, is told of every stored compaction (the
	// audit log).
	OnCompaction func(ctx context.Context, id engine.Identity, c *store.Compaction)
}

// Agent is one agent's session configuration, ready for its turns. It is
// safe for concurrent use.
type Agent struct {
	cfg     *config.Session
	system  string // the agent's own system prompt, used without context blocks
	deps    Deps
	sources []source // per context block
	tools   []engine.Tool
}

// New returns the Agent of cfg for an agent whose own system prompt is
// system.
func New(cfg *config.Session, system string, deps Deps) *Agent {
	deps.HTTP = sameorigin.Client(deps.HTTP)
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	a := &Agent{cfg: cfg, system: system, deps: deps, sources: make([]source, len(cfg.Context))}
	for i := range cfg.Context {
		b := &cfg.Context[i]
		switch {
		case b.Text != nil:
			a.sources[i] = textSource(*b.Text)
		case b.File != "":
			a.sources[i] = &fileSource{path: b.File}
		case b.HTTP != nil:
			a.sources[i] = &httpSource{cfg: b.HTTP, client: deps.HTTP}
		}
	}
	if t, ok := a.updateTool(); ok {
		a.tools = append(a.tools, t)
	}
	if cfg.HistorySearch {
		a.tools = append(a.tools, a.searchTool())
	}
	return a
}

// Turn is a turn as the session configuration prepared it.
type Turn struct {
	// System is the assembled system prompt: the context blocks (or the
	// agent's own system prompt) and the compaction summary.
	System string
	// Messages is the transcript to send: the messages after the
	// compaction summary, or the whole transcript.
	Messages []engine.UIMessage
	// Info goes into engine.TurnRequest.Session.
	Info *engine.SessionInfo
	// Tools are the tools the configuration provides for this turn.
	Tools []engine.Tool
}

// UnavailableError is a context block whose source failed without a
// fallback: the turn fails with its message, which names the block but
// not the source's details (they are logged).
type UnavailableError struct {
	Block string
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("context block %q is unavailable: its source failed and it has no fallback", e.Block)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Prepare assembles the turn of session (tenant, sessionID) whose stored
// transcript is history: the context blocks, the compaction in force, a
// new compaction when the conversation passed the threshold. stored is
// false for turns without a stored session (OpenAI-compatible), which get
// the static blocks only: no writable content, no compaction, no tools.
func (a *Agent) Prepare(ctx context.Context, id engine.Identity, history []engine.UIMessage, stored bool) (*Turn, error) {
	state := &store.SessionState{}
	if stored {
		var err error
		if state, err = a.deps.Store.SessionState(ctx, id.Principal.Tenant, id.SessionID); err != nil {
			return nil, fmt.Errorf("loading session state: %w", err)
		}
	}
	blocks, contents, err := a.render(ctx, state.Blocks, stored)
	if err != nil {
		return nil, err
	}
	t := &Turn{Messages: history, Info: &engine.SessionInfo{Context: contents, CachePrompt: a.cfg.CachedPrompt}}
	if stored {
		t.Tools = a.tools
	}
	summary, offset := "", 0
	if c := state.Compaction; c != nil {
		if i := indexOf(history, c.ThroughMessageID); i >= 0 {
			summary, offset, t.Messages = c.Summary, i+1, history[i+1:]
		}
	}
	if cp := a.cfg.Compaction; cp != nil && stored {
		tokens := state.LastInputTokens
		if tokens == 0 {
			tokens = estimateTokens(joinBlocks(blocks, summary)) + estimateMessages(engine.ConvertToModelMessages(t.Messages))
		}
		if tokens > cp.After {
			if cut := splitPoint(t.Messages, cp.KeepLast); cut > 0 {
				c := &compaction{a: a, id: id, previous: summary, offset: offset}
				s, err := c.run(ctx, t.Messages[:cut], engine.ConvertToModelMessages(t.Messages[:cut]), store.CompactThreshold, tokens)
				if err != nil {
					return nil, err
				}
				summary, offset, t.Messages = s, offset+cut, t.Messages[cut:]
			}
		}
	}
	t.Info.Summary = summary
	all := withSummary(blocks, summary, a.cfg.CachedPrompt)
	t.System = joinBlocks(all, "")
	if a.cfg.CachedPrompt {
		t.Info.SystemBlocks = all
	}
	if cp := a.cfg.Compaction; cp != nil && stored && cp.IsReactive() {
		t.Info.Compactor = &compaction{a: a, id: id, previous: summary, offset: offset, visible: t.Messages, blocks: blocks}
	}
	return t, nil
}

// Observe records the input tokens the last step of a finished turn
// reported, the compaction threshold's measure for the next turn.
func (a *Agent) Observe(ctx context.Context, id engine.Identity, res *engine.TurnResult) {
	if a.cfg.Compaction == nil || len(res.Steps) == 0 {
		return
	}
	n := res.Steps[len(res.Steps)-1].Usage.InputTokens
	if n <= 0 {
		return
	}
	if err := a.deps.Store.SetLastInputTokens(ctx, id.Principal.Tenant, id.SessionID, n); err != nil {
		a.deps.Log.Error("recording input tokens", "requestId", id.RequestID, "err", err)
	}
}

// render renders the context blocks in their order (static blocks first
// with cachedPrompt), with writable blocks' stored content, and returns
// the blocks and the content by name. Without context blocks, the agent's
// own system prompt is the one block. withTool says whether the turn
// offers update_context (a writable block's heading names it).
func (a *Agent) render(ctx context.Context, stored map[string]string, withTool bool) ([]engine.SystemBlock, map[string]string, error) {
	if len(a.cfg.Context) == 0 {
		if a.system == "" {
			return nil, nil, nil
		}
		return []engine.SystemBlock{{Text: a.system}}, nil, nil
	}
	contents := make(map[string]string, len(a.cfg.Context))
	var static, writable []engine.SystemBlock
	for i := range a.cfg.Context {
		b := &a.cfg.Context[i]
		var content string
		if b.Writable {
			content = stored[b.Name]
		} else {
			var err error
			if content, err = a.sources[i].content(ctx); err != nil {
				if h := b.HTTP; h != nil && h.Fallback != nil {
					a.deps.Log.Warn("context block source failed; using its fallback", "block", b.Name, "err", err)
					content = *h.Fallback
				} else {
					a.deps.Log.Error("context block source failed", "block", b.Name, "err", err)
					return nil, nil, &UnavailableError{Block: b.Name, Err: err}
				}
			}
		}
		contents[b.Name] = content
		block := engine.SystemBlock{Text: renderBlock(b, content, withTool)}
		if b.Writable && a.cfg.CachedPrompt {
			writable = append(writable, block)
		} else {
			static = append(static, block)
		}
	}
	if a.cfg.CachedPrompt && len(static) > 0 && len(writable) > 0 {
		static[len(static)-1].Cache = true
	}
	return append(static, writable...), contents, nil
}

// renderBlock renders one block: a heading with its name, its
// description, and its content. A writable block's heading says how the
// model writes it, when the turn offers the tool.
func renderBlock(b *config.ContextBlock, content string, withTool bool) string {
	var sb strings.Builder
	sb.WriteString("## ")
	sb.WriteString(b.Name)
	if b.Writable && withTool {
		fmt.Fprintf(&sb, " (writable with the %s tool, at most %d tokens)", UpdateToolName, b.MaxTokens)
	}
	sb.WriteByte('\n')
	if b.Description != "" {
		sb.WriteString(b.Description)
		sb.WriteByte('\n')
	}
	switch {
	case content != "":
		sb.WriteString(strings.TrimRight(content, "\n"))
	case b.Writable:
		sb.WriteString("(empty)")
	}
	return sb.String()
}

// summaryHeading starts the system block of a compaction summary.
const summaryHeading = "## Summary of the earlier conversation\n"

// withSummary appends the summary's block to blocks; with cachedPrompt
// the last block ends a cacheable prefix.
func withSummary(blocks []engine.SystemBlock, summary string, cached bool) []engine.SystemBlock {
	out := blocks
	if summary != "" {
		out = append(blocks[:len(blocks):len(blocks)], engine.SystemBlock{Text: summaryHeading + summary})
	}
	if cached && len(out) > 0 {
		out = append(out[:0:0], out...)
		out[len(out)-1].Cache = true
	}
	return out
}

// joinBlocks is the system prompt of blocks, plus a summary block.
func joinBlocks(blocks []engine.SystemBlock, summary string) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		sb.WriteString(b.Text)
	}
	if summary != "" {
		if sb.Len() > 0 {
			sb.WriteString("\n\n")
		}
		sb.WriteString(summaryHeading + summary)
	}
	return sb.String()
}

// indexOf returns the index of the message id in msgs, -1 if absent.
func indexOf(msgs []engine.UIMessage, id string) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].ID == id {
			return i
		}
	}
	return -1
}

// errNothingToCompact is a reactive compaction with no older message to
// summarize.
var errNothingToCompact = errors.New("the conversation has no older messages to summarize")
