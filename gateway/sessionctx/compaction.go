package sessionctx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
)

// maxRenderedPart bounds one message part in the transcript a summary is
// written from: a huge tool output is cut, its start kept.
const maxRenderedPart = 4000

// compaction summarizes the older part of one session's conversation.
// As the engine's Compactor it runs once after a context overflow.
type compaction struct {
	a  *Agent
	id engine.Identity
	// previous is the summary in force ("" if none); offset is the number
	// of stored messages it replaces.
	previous string
	offset   int
	// visible are the stored messages the turn sends; blocks the context
	// blocks of its system prompt (reactive compaction only).
	visible []engine.UIMessage
	blocks  []engine.SystemBlock
}

// run summarizes older (whose model messages are model) after the
// previous summary, stores the compaction and returns the new summary.
func (c *compaction) run(ctx context.Context, older []engine.UIMessage, model []engine.ModelMessage, reason string, tokens int) (string, error) {
	cp := c.a.cfg.Compaction
	summary, err := c.summarize(ctx, model)
	if err != nil {
		return "", fmt.Errorf("compacting the conversation: %w", err)
	}
	rec := &store.Compaction{
		Tenant: c.id.Principal.Tenant, SessionID: c.id.SessionID, ThroughMessageID: older[len(older)-1].ID,
		MessageCount: c.offset + len(older), Summary: summary, Reason: reason, InputTokens: tokens, Model: cp.Model,
	}
	if err := c.a.deps.Store.AddCompaction(ctx, rec); err != nil {
		return "", fmt.Errorf("compacting the conversation: %w", err)
	}
	if f := c.a.deps.OnCompaction; f != nil {
		f(ctx, c.id, rec)
	}
	return summary, nil
}

// summarize asks the compaction model for a summary of the previous
// summary and msgs.
func (c *compaction) summarize(ctx context.Context, msgs []engine.ModelMessage) (string, error) {
	cp := c.a.cfg.Compaction
	prov, upstream, err := c.a.deps.Models.Resolve(cp.Model)
	if err != nil {
		return "", err
	}
	var in strings.Builder
	if c.previous != "" {
		in.WriteString("Summary of what came before:\n")
		in.WriteString(c.previous)
		in.WriteString("\n\n")
	}
	in.WriteString("Conversation:\n")
	renderTranscript(&in, msgs)
	stream, err := prov.Stream(ctx, &engine.ModelRequest{
		Model:    upstream,
		System:   cp.Prompt,
		Messages: []engine.ModelMessage{{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: in.String()}}}},
	})
	if err != nil {
		return "", fmt.Errorf("model %s: %w", cp.Model, err)
	}
	defer stream.Close()
	var out strings.Builder
	for stream.Next() {
		if p := stream.Current(); p.Type == engine.StreamTextDelta {
			out.WriteString(p.Text)
		}
	}
	if err := stream.Err(); err != nil {
		return "", fmt.Errorf("model %s: %w", cp.Model, err)
	}
	summary := strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(out.String(), "\uFFFD"), "\x00", ""))
	if summary == "" {
		return "", fmt.Errorf("model %s wrote an empty summary", cp.Model)
	}
	return summary, nil
}

// renderTranscript writes msgs as plain text, one line per part.
func renderTranscript(sb *strings.Builder, msgs []engine.ModelMessage) {
	for _, m := range msgs {
		for _, p := range m.Content {
			switch p.Type {
			case engine.ContentText:
				fmt.Fprintf(sb, "%s: %s\n", m.Role, cut(p.Text))
			case engine.ContentToolCall:
				fmt.Fprintf(sb, "%s called %s with %s\n", m.Role, p.ToolName, cut(string(p.Input)))
			case engine.ContentToolResult:
				fmt.Fprintf(sb, "%s returned: %s\n", p.ToolName, cut(string(p.Output)))
			}
		}
	}
}

// cut shortens s to maxRenderedPart bytes, on a rune boundary.
func cut(s string) string {
	if len(s) <= maxRenderedPart {
		return s
	}
	n := maxRenderedPart
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " […]"
}

// Compact implements engine.Compactor: after a context overflow, the
// older stored messages the step sent are summarized (the summary stored
// as after a threshold), and the step is sent again with the summary in
// the system prompt and the recent messages, plus what this turn added.
func (c *compaction) Compact(ctx context.Context, system string, messages []engine.ModelMessage) (string, []engine.SystemBlock, []engine.ModelMessage, error) {
	cut := splitPoint(c.visible, c.a.cfg.Compaction.KeepLast)
	if cut == 0 {
		// Overflowing with fewer messages than keepLast: keep just the
		// last user message and what follows.
		cut = splitPoint(c.visible, 1)
	}
	if cut == 0 {
		return "", nil, nil, errNothingToCompact
	}
	older := engine.ConvertToModelMessages(c.visible[:cut])
	sent := len(engine.ConvertToModelMessages(c.visible))
	if len(messages) < sent || len(older) > len(messages) {
		return "", nil, nil, errors.New("the step's messages are not the stored conversation (a rule replaced them)")
	}
	assembled := joinBlocks(withSummary(c.blocks, c.previous, false), "")
	summary, err := c.run(ctx, c.visible[:cut], older, store.CompactOverflow, 0)
	if err != nil {
		return "", nil, nil, err
	}
	c.previous, c.offset, c.visible = summary, c.offset+cut, c.visible[cut:]
	blocks := withSummary(c.blocks, summary, c.a.cfg.CachedPrompt)
	newSystem := joinBlocks(blocks, "")
	if system != assembled {
		// A rule replaced the assembled prompt: keep its prompt, add the summary.
		newSystem, blocks = joinBlocks([]engine.SystemBlock{{Text: system}}, summary), nil
	}
	if !c.a.cfg.CachedPrompt {
		blocks = nil
	}
	return newSystem, blocks, messages[len(older):], nil
}
