package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ModelRequest is one model step as sent to a provider. Every sampling field
// of TurnConfig reaches it; nil means "provider default".
type ModelRequest struct {
	// Model is the upstream model id (after alias resolution).
	Model            string
	System           string
	Messages         []ModelMessage
	Tools            []ToolInfo
	ToolChoice       *ToolChoice
	MaxOutputTokens  *int
	Temperature      *float64
	TopP             *float64
	TopK             *int
	PresencePenalty  *float64
	FrequencyPenalty *float64
	StopSequences    []string
	Seed             *int64
	Headers          map[string]string
	ProviderOptions  map[string]any
	// Output asks for structured output (JSON matching Output.Schema).
	Output *OutputSpec
	// SendReasoning tells providers that support it to return reasoning.
	SendReasoning bool
	// SystemBlocks, when set, are System's parts (SessionInfo.SystemBlocks)
	// for providers that take a list of system blocks.
	SystemBlocks []SystemBlock
	// CachePrompt asks for cache breakpoints (SessionInfo.CachePrompt).
	CachePrompt bool
}

// Stream part types a provider emits (the AI SDK's TextStreamPart names).
const (
	StreamTextStart      = "text-start"
	StreamTextDelta      = "text-delta"
	StreamTextEnd        = "text-end"
	StreamReasoningStart = "reasoning-start"
	StreamReasoningDelta = "reasoning-delta"
	StreamReasoningEnd   = "reasoning-end"
	StreamToolInputStart = "tool-input-start"
	StreamToolInputDelta = "tool-input-delta"
	// StreamToolCall carries a complete tool call (Input is whole JSON).
	StreamToolCall = "tool-call"
	// StreamFinish ends a step: FinishReason, Usage, ProviderMetadata.
	StreamFinish = "finish"
)

// StreamPart is one part of a model stream.
type StreamPart struct {
	Type             string          `json:"type"`
	ID               string          `json:"id,omitempty"`
	Text             string          `json:"text,omitempty"`
	ToolCallID       string          `json:"toolCallId,omitempty"`
	ToolName         string          `json:"toolName,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	FinishReason     string          `json:"finishReason,omitempty"`
	RawFinishReason  string          `json:"rawFinishReason,omitempty"`
	Usage            *Usage          `json:"usage,omitempty"`
	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
	Warnings         []string        `json:"warnings,omitempty"`
}

// Stream iterates over one model step's parts, in the style of openai-go's
// ssestream: call Next until it returns false, read Current, then check Err.
// Close releases the connection and may be called at any time.
type Stream interface {
	Next() bool
	Current() StreamPart
	Err() error
	Close() error
}

// Provider starts model streams. Stream may return an *UpstreamError for
// failures before the first part; the engine retries the retryable ones.
type Provider interface {
	Stream(ctx context.Context, req *ModelRequest) (Stream, error)
}

// ModelResolver maps a model name (an alias from config, or "provider/model")
// to a provider and the upstream model id.
type ModelResolver interface {
	Resolve(model string) (Provider, string, error)
}

// UpstreamError is a model provider failure with what retry logic needs.
type UpstreamError struct {
	// Status is the HTTP status, 0 for transport errors.
	Status int
	// Retryable reports whether retrying may succeed (429, 5xx, transport).
	Retryable bool
	// RetryAfter is the server's requested delay, zero if none.
	RetryAfter time.Duration
	// Message is the provider's error text; never shown to clients by default.
	Message string
	// ContextOverflow marks a request rejected for not fitting the model's
	// context window (OpenAI context_length_exceeded, Anthropic "prompt is
	// too long").
	ContextOverflow bool
}

// Error describes the failure with its HTTP status, if any. It carries
// provider text, so the engine never shows it to clients by default.
func (e *UpstreamError) Error() string {
	if e.Status == 0 {
		return "upstream: " + e.Message
	}
	return fmt.Sprintf("upstream: status %d: %s", e.Status, e.Message)
}
