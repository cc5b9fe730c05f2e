// Package anthropic streams the Anthropic Messages API behind
// engine.Provider: text, thinking, tool_use blocks with input_json_delta,
// and usage with cache tokens.
//
// Like the openai package it speaks the wire format directly (the SSE
// decoder and error mapping are shared), following anthropic-sdk-go's
// stream accumulation; the tests replay streams captured from the API.
package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/internal/wire"
	"github.com/turngate/turngate/internal/tracing"
)

// Defaults for Config.
const (
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultVersion is the anthropic-version header: the stable API version.
	DefaultVersion = "2023-06-01"
	// DefaultMaxTokens is sent when a request sets no MaxOutputTokens; the
	// API requires max_tokens.
	DefaultMaxTokens = 4096
)

// Config configures a Provider.
type Config struct {
	// Name keys this provider in ModelRequest.ProviderOptions and in
	// providerMetadata (default "anthropic").
	Name string
	// BaseURL is the API root without /v1 (default DefaultBaseURL).
	BaseURL string
	// APIKey is sent as x-api-key.
	APIKey string
	// Version is the anthropic-version header (default DefaultVersion).
	Version string
	// Headers are sent with every request; request headers override them.
	Headers map[string]string
	// Timeout bounds the wait for response headers; zero means none.
	Timeout time.Duration
	// MaxTokens is max_tokens when a request sets none (default
	// DefaultMaxTokens).
	MaxTokens int
	// HTTPClient sends the requests (default http.DefaultClient), with the
	// trace context of the request's context (tracing.Transport).
	HTTPClient *http.Client
}

// Provider streams Anthropic Messages. It is safe for concurrent use.
type Provider struct {
	cfg Config
}

// New returns a Provider for cfg, defaults applied.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "anthropic"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	cfg.HTTPClient = tracing.Client(cfg.HTTPClient)
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	return &Provider{cfg: cfg}
}

// Stream sends req and returns its stream. Failures before the stream
// starts are *engine.UpstreamError (or ctx's error).
func (p *Provider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	tracing.SetProvider(ctx, "anthropic")
	body, warnings, err := p.body(req)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Anthropic-Version", p.cfg.Version)
	if p.cfg.APIKey != "" {
		h.Set("X-Api-Key", p.cfg.APIKey)
	}
	return wire.Open(ctx, wire.Request{Client: p.cfg.HTTPClient, URL: wire.Endpoint(p.cfg.BaseURL, "/v1/messages"), Header: h,
		Overrides: []map[string]string{p.cfg.Headers, req.Headers}, Body: body, HeaderTimeout: p.cfg.Timeout},
		&handler{name: p.cfg.Name, warnings: warnings})
}

// body builds the request body (keys sorted, so bodies are reproducible).
// ProviderOptions[Name] is merged last: that is where thinking
// ({"thinking":{"type":"enabled","budget_tokens":N}}) and other
// Anthropic-only fields go.
func (p *Provider) body(req *engine.ModelRequest) ([]byte, []string, error) {
	maxTokens := p.cfg.MaxTokens
	if req.MaxOutputTokens != nil {
		maxTokens = *req.MaxOutputTokens
	}
	turns, err := p.messages(req.Messages)
	if err != nil {
		return nil, nil, &engine.UpstreamError{Message: err.Error()}
	}
	b := map[string]any{
		"model":      req.Model,
		"max_tokens": maxTokens,
		"messages":   turns,
		"stream":     true,
	}
	if req.CachePrompt {
		cacheConversation(turns)
	}
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	for _, m := range req.Messages {
		if m.Role == engine.RoleSystem {
			system = append(system, m.Text())
		}
	}
	if blocks, ok := cachedSystem(req); ok {
		b["system"] = blocks
	} else if len(system) > 0 {
		b["system"] = strings.Join(system, "\n\n")
	}
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			tool := map[string]any{"name": t.Name, "input_schema": wire.SchemaOrEmpty(t.InputSchema)}
			if t.Description != "" {
				tool["description"] = t.Description
			}
			tools[i] = tool
		}
		b["tools"] = tools
	}
	if tc := req.ToolChoice; tc != nil && tc.Type != "" {
		switch tc.Type {
		case engine.ToolChoiceRequired:
			b["tool_choice"] = map[string]any{"type": "any"}
		case engine.ToolChoiceTool:
			b["tool_choice"] = map[string]any{"type": "tool", "name": tc.ToolName}
		default: // auto, none
			b["tool_choice"] = map[string]any{"type": tc.Type}
		}
	}
	wire.SetPtr(b, "temperature", req.Temperature)
	wire.SetPtr(b, "top_p", req.TopP)
	wire.SetPtr(b, "top_k", req.TopK)
	if len(req.StopSequences) > 0 {
		b["stop_sequences"] = req.StopSequences
	}
	var warnings []string
	for name, set := range map[string]bool{"presencePenalty": req.PresencePenalty != nil,
		"frequencyPenalty": req.FrequencyPenalty != nil, "seed": req.Seed != nil} {
		if set {
			warnings = append(warnings, name+" is not supported by the Anthropic Messages API and was not sent")
		}
	}
	slices.Sort(warnings)
	if o := req.Output; o != nil && len(o.Schema) > 0 {
		b["output_config"] = map[string]any{"format": map[string]any{"type": "json_schema", "schema": o.Schema}}
	}
	wire.MergeOptions(b, req.ProviderOptions, p.cfg.Name)
	body, err := json.Marshal(b)
	if err != nil {
		return nil, nil, &engine.UpstreamError{Message: "encoding request: " + err.Error()}
	}
	return body, warnings, nil
}

// messages maps model messages to Messages API turns: assistant text,
// thinking (when it carries its signature) and tool_use blocks; tool
// results as tool_result blocks of a user turn. Consecutive turns of the
// same role are merged, as the API expects alternating roles. User files
// become image and document blocks (fileBlock).
func (p *Provider) messages(msgs []engine.ModelMessage) ([]any, error) {
	type turn struct {
		role   string
		blocks []any
	}
	var turns []*turn
	add := func(role string, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, &turn{role: role, blocks: blocks})
	}
	for _, m := range msgs {
		var blocks []any
		for _, c := range m.Content {
			switch c.Type {
			case engine.ContentText:
				if c.Text != "" {
					blocks = append(blocks, map[string]any{"type": "text", "text": c.Text})
				}
			case engine.ContentReasoning:
				switch meta := reasoningMeta(c.ProviderMetadata); {
				case meta.RedactedData != "":
					blocks = append(blocks, map[string]any{"type": "redacted_thinking", "data": meta.RedactedData})
				case meta.Signature != "":
					blocks = append(blocks, map[string]any{"type": "thinking", "thinking": c.Text, "signature": meta.Signature})
				}
			case engine.ContentFile:
				block, err := p.fileBlock(c)
				if err != nil {
					return nil, err
				}
				blocks = append(blocks, block)
			case engine.ContentToolCall:
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.ToolCallID, "name": c.ToolName, "input": objectOrEmpty(c.Input)})
			case engine.ContentToolResult:
				block := map[string]any{"type": "tool_result", "tool_use_id": c.ToolCallID, "content": wire.OutputText(c.Output)}
				if c.IsError {
					block["is_error"] = true
				}
				blocks = append(blocks, block)
			}
		}
		switch m.Role {
		case engine.RoleUser, engine.RoleTool:
			add("user", blocks...)
		case engine.RoleAssistant:
			add("assistant", blocks...)
		}
	}
	out := make([]any, len(turns))
	for i, t := range turns {
		out[i] = map[string]any{"role": t.role, "content": t.blocks}
	}
	return out, nil
}

// thinkingMeta is what a reasoning part's providerMetadata keeps for the
// API: the thinking block's signature (the API rejects thinking without
// it) or a redacted_thinking block's data.
type thinkingMeta struct {
	Signature    string `json:"signature"`
	RedactedData string `json:"redactedData"`
}

// reasoningMeta reads {"anthropic":{…}} from a reasoning part.
func reasoningMeta(meta json.RawMessage) thinkingMeta {
	var m struct {
		Anthropic thinkingMeta `json:"anthropic"`
	}
	_ = json.Unmarshal(meta, &m)
	return m.Anthropic
}

// objectOrEmpty returns a tool call's input if it is a JSON object, else
// {}: tool_use input must be an object, and a model's malformed input was
// already reported to it as a tool error.
func objectOrEmpty(in json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(in, &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return in
}

// Provider is an engine model provider.
var _ engine.Provider = (*Provider)(nil)
