package extension

import (
	"encoding/json"

	"github.com/turngate/turngate/engine"
)

// The snapshots are the reference's extension snapshots, field for field
// (think-lifecycle-hooks.md, "Extension hook subscriptions";
// think-implementation.md §2.11): narrower than the hook contexts rules
// see, and JSON only. The turn's identity travels in the envelope.

// BeforeTurnSnapshot is what beforeTurn extensions receive: the turn as
// the rules configured it.
type BeforeTurnSnapshot struct {
	// System is the system prompt, a rule's override included; each
	// extension sees the one an earlier extension set.
	System string `json:"system"`
	// ToolNames are the tools the model is offered: the rules' (or an
	// earlier extension's) activeTools when set, else all the agent's.
	ToolNames    []string       `json:"toolNames"`
	MessageCount int            `json:"messageCount"`
	Continuation bool           `json:"continuation"`
	Body         map[string]any `json:"body,omitempty"`
	ModelID      string         `json:"modelId"`
}

// ToolCallSnapshot is what beforeToolCall extensions receive. Unlike the
// reference, whose stepNumber is always undefined here, StepNumber is set.
type ToolCallSnapshot struct {
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input"`
	StepNumber int             `json:"stepNumber"`
	Dynamic    bool            `json:"dynamic,omitempty"`
}

// ToolResultSnapshot is what afterToolCall extensions receive: Output
// when the call succeeded, as the model saw it (after redaction rules),
// Error otherwise.
type ToolResultSnapshot struct {
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input"`
	StepNumber int             `json:"stepNumber"`
	DurationMs float64         `json:"durationMs"`
	Success    bool            `json:"success"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	Dynamic    bool            `json:"dynamic,omitempty"`
}

// StepSnapshot is what onStepFinish extensions receive.
type StepSnapshot struct {
	StepNumber       int             `json:"stepNumber"`
	FinishReason     string          `json:"finishReason"`
	Text             string          `json:"text"`
	ReasoningText    string          `json:"reasoningText"`
	ToolCallCount    int             `json:"toolCallCount"`
	ToolResultCount  int             `json:"toolResultCount"`
	Usage            UsageSnapshot   `json:"usage"`
	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
}

// UsageSnapshot is a step's token usage, every count present.
type UsageSnapshot struct {
	InputTokens       int `json:"inputTokens"`
	OutputTokens      int `json:"outputTokens"`
	TotalTokens       int `json:"totalTokens"`
	ReasoningTokens   int `json:"reasoningTokens"`
	CachedInputTokens int `json:"cachedInputTokens"`
}

// ChunkSnapshot is one model stream part, as onChunk extensions receive it
// (in batches, see Envelope.Snapshots).
type ChunkSnapshot struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
}

// beforeTurnSnapshot builds the beforeTurn snapshot of tc as the rules'
// result cfg (nil: no rule fired) configures it.
func beforeTurnSnapshot(tc *engine.TurnContext, cfg *engine.TurnConfig) BeforeTurnSnapshot {
	s := BeforeTurnSnapshot{System: tc.System, MessageCount: len(tc.Messages), Continuation: tc.Continuation,
		Body: tc.Body, ModelID: tc.Model, ToolNames: make([]string, 0, len(tc.Tools))}
	for _, t := range tc.Tools {
		s.ToolNames = append(s.ToolNames, t.Name)
	}
	if cfg != nil {
		s.see(cfg)
		if cfg.Model != nil {
			s.ModelID = *cfg.Model
		}
	}
	return s
}

// see updates the snapshot with what a configuration sets, for the next
// extension.
func (s *BeforeTurnSnapshot) see(cfg *engine.TurnConfig) {
	if cfg.System != nil {
		s.System = *cfg.System
	}
	if cfg.Messages != nil {
		s.MessageCount = len(*cfg.Messages)
	}
	if cfg.ActiveTools != nil {
		s.ToolNames = append([]string{}, *cfg.ActiveTools...)
	}
}

func toolCallSnapshot(tc *engine.ToolCallContext) ToolCallSnapshot {
	return ToolCallSnapshot{ToolName: tc.ToolName, ToolCallID: tc.ToolCallID, Input: tc.Input, StepNumber: tc.StepNumber, Dynamic: tc.Dynamic}
}

func toolResultSnapshot(rc *engine.ToolCallResultContext) ToolResultSnapshot {
	s := ToolResultSnapshot{ToolName: rc.ToolName, ToolCallID: rc.ToolCallID, Input: rc.Input, StepNumber: rc.StepNumber,
		DurationMs: rc.DurationMs, Success: rc.Success, Dynamic: rc.Dynamic}
	switch {
	case !rc.Success:
		s.Error = rc.Error
	case rc.ModelOutput != nil:
		s.Output = rc.ModelOutput
	default:
		s.Output = rc.Output
	}
	return s
}

func stepSnapshot(r *engine.StepResult) StepSnapshot {
	u := r.Usage
	return StepSnapshot{StepNumber: r.StepNumber, FinishReason: r.FinishReason, Text: r.Text, ReasoningText: r.ReasoningText,
		ToolCallCount: len(r.ToolCalls), ToolResultCount: len(r.ToolResults),
		Usage: UsageSnapshot{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			ReasoningTokens: u.ReasoningTokens, CachedInputTokens: u.CachedInputTokens},
		ProviderMetadata: r.ProviderMetadata}
}

// chunkSnapshot keeps text for the parts whose AI SDK chunk has a text
// field (text and reasoning deltas); a tool-input-delta's partial input is
// not text (the AI SDK calls it delta) and is left out, as the reference
// does.
func chunkSnapshot(p *engine.StreamPart) ChunkSnapshot {
	s := ChunkSnapshot{Type: p.Type, ToolName: p.ToolName, ToolCallID: p.ToolCallID}
	if p.Type == engine.StreamTextDelta || p.Type == engine.StreamReasoningDelta {
		s.Text = p.Text
	}
	return s
}
