// Package openai streams OpenAI-compatible Chat Completions (OpenAI, vLLM,
// Ollama, and other servers speaking the same wire format) behind
// engine.Provider.
//
// It speaks the wire format directly rather than through the SDK so that
// it controls the exact request body (every sampling field, provider
// options merged as extra fields), reads reasoning_content deltas that
// the SDK's types do not carry, and reports truncated streams, which the
// SDK accepts silently. The format follows openai-go v3's ssestream and
// stream accumulator; the tests replay streams captured from real servers.
package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/internal/wire"
	"github.com/turngate/turngate/internal/tracing"
)

// DefaultBaseURL is OpenAI's API root; vLLM and Ollama serve the same API
// under their own host's /v1.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider.
type Config struct {
	// Name keys this provider in ModelRequest.ProviderOptions and in
	// providerMetadata (default "openai").
	Name string
	// BaseURL is the API root including /v1 (default DefaultBaseURL).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Headers are sent with every request; request headers override them.
	Headers map[string]string
	// Timeout bounds the wait for response headers; zero means none. The
	// stream itself is bounded by the engine's timeouts.
	Timeout time.Duration
	// MaxTokensField is the body field for ModelRequest.MaxOutputTokens:
	// "max_tokens" (default; vLLM, Ollama) or "max_completion_tokens"
	// (OpenAI's reasoning models).
	MaxTokensField string
	// HTTPClient sends the requests (default http.DefaultClient), with the
	// trace context of the request's context (tracing.Transport). It
	// should not retry: the engine does.
	HTTPClient *http.Client
}

// Provider streams Chat Completions. It is safe for concurrent use.
type Provider struct {
	cfg Config
}

// New returns a Provider for cfg, defaults applied.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxTokensField == "" {
		cfg.MaxTokensField = "max_tokens"
	}
	cfg.HTTPClient = tracing.Client(cfg.HTTPClient)
	return &Provider{cfg: cfg}
}

// Stream sends req and returns its stream. Failures before the stream
// starts are *engine.UpstreamError (or ctx's error).
func (p *Provider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	tracing.SetProvider(ctx, "openai")
	body, warnings, err := p.body(req)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if p.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	return wire.Open(ctx, wire.Request{Client: p.cfg.HTTPClient, URL: wire.Endpoint(p.cfg.BaseURL, "/chat/completions"), Header: h,
		Overrides: []map[string]string{p.cfg.Headers, req.Headers}, Body: body, HeaderTimeout: p.cfg.Timeout},
		&handler{name: p.cfg.Name, warnings: warnings})
}

// body builds the request body. Keys are written sorted, so bodies are
// byte-for-byte reproducible.
func (p *Provider) body(req *engine.ModelRequest) ([]byte, []string, error) {
	msgs, err := p.messages(req)
	if err != nil {
		return nil, nil, &engine.UpstreamError{Message: err.Error()}
	}
	b := map[string]any{
		"model":          req.Model,
		"messages":       msgs,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	var warnings []string
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			fn := map[string]any{"name": t.Name, "parameters": wire.SchemaOrEmpty(t.InputSchema)}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			tools[i] = map[string]any{"type": "function", "function": fn}
		}
		b["tools"] = tools
	}
	if tc := req.ToolChoice; tc != nil && tc.Type != "" {
		if tc.Type == engine.ToolChoiceTool {
			b["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.ToolName}}
		} else {
			b["tool_choice"] = tc.Type
		}
	}
	wire.SetPtr(b, p.cfg.MaxTokensField, req.MaxOutputTokens)
	wire.SetPtr(b, "temperature", req.Temperature)
	wire.SetPtr(b, "top_p", req.TopP)
	wire.SetPtr(b, "presence_penalty", req.PresencePenalty)
	wire.SetPtr(b, "frequency_penalty", req.FrequencyPenalty)
	wire.SetPtr(b, "seed", req.Seed)
	if req.TopK != nil {
		warnings = append(warnings, "topK is not part of the Chat Completions API and was not sent; set it in providerOptions."+p.cfg.Name+" for servers that accept top_k")
	}
	if len(req.StopSequences) > 0 {
		b["stop"] = req.StopSequences
	}
	if o := req.Output; o != nil {
		if len(o.Schema) == 0 {
			b["response_format"] = map[string]any{"type": "json_object"}
		} else {
			name := o.Name
			if name == "" {
				name = "output"
			}
			b["response_format"] = map[string]any{"type": "json_schema",
				"json_schema": map[string]any{"name": name, "schema": o.Schema}}
		}
	}
	wire.MergeOptions(b, req.ProviderOptions, p.cfg.Name)
	body, err := json.Marshal(b)
	if err != nil {
		return nil, nil, &engine.UpstreamError{Message: "encoding request: " + err.Error()}
	}
	return body, warnings, nil
}

// messages maps the system prompt and model messages to Chat Completions
// messages: assistant tool calls as tool_calls, each tool result as its
// own role "tool" message, user files as content parts (userContent).
// Reasoning parts are not sent back.
func (p *Provider) messages(req *engine.ModelRequest) ([]any, error) {
	var out []any
	if req.System != "" {
		out = append(out, map[string]any{"role": "system", "content": req.System})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case engine.RoleSystem:
			out = append(out, map[string]any{"role": m.Role, "content": m.Text()})
		case engine.RoleUser:
			content, err := p.userContent(m)
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{"role": m.Role, "content": content})
		case engine.RoleAssistant:
			msg := map[string]any{"role": "assistant", "content": nil}
			if text := m.Text(); text != "" {
				msg["content"] = text
			}
			var calls []any
			for _, c := range m.Content {
				if c.Type == engine.ContentToolCall {
					calls = append(calls, map[string]any{"id": c.ToolCallID, "type": "function",
						"function": map[string]any{"name": c.ToolName, "arguments": string(c.Input)}})
				}
			}
			if calls != nil {
				msg["tool_calls"] = calls
			}
			out = append(out, msg)
		case engine.RoleTool:
			for _, c := range m.Content {
				if c.Type == engine.ContentToolResult {
					out = append(out, map[string]any{"role": "tool", "tool_call_id": c.ToolCallID, "content": wire.OutputText(c.Output)})
				}
			}
		}
	}
	return out, nil
}

// finishReasons maps Chat Completions finish reasons to the AI SDK's.
var finishReasons = map[string]string{
	"stop":           engine.FinishStop,
	"length":         engine.FinishLength,
	"tool_calls":     engine.FinishToolCalls,
	"function_call":  engine.FinishToolCalls,
	"content_filter": engine.FinishContentFilter,
}

// Provider is an engine model provider.
var _ engine.Provider = (*Provider)(nil)
