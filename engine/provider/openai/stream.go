package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/internal/wire"
)

// chunk is a chat.completion.chunk, or an in-stream error object.
type chunk struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []choice        `json:"choices"`
	Usage             *usage          `json:"usage"`
	Error             json.RawMessage `json:"error"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		Content *string `json:"content"`
		// ReasoningContent is vLLM's and DeepSeek's reasoning field;
		// Ollama and OpenRouter name it reasoning.
		ReasoningContent *string         `json:"reasoning_content"`
		Reasoning        *string         `json:"reasoning"`
		Refusal          *string         `json:"refusal"`
		ToolCalls        []toolCallDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// MaxToolCalls bounds the tool calls of one response; parallel calls are a
// handful in practice, and the index comes from the server.
const MaxToolCalls = 128

// toolCall is a tool call being assembled from its fragments.
type toolCall struct {
	id, name string
	args     strings.Builder
	started  bool
}

// handler assembles chunks into stream parts: text and reasoning blocks,
// tool calls by index, and the finish part with usage.
type handler struct {
	name     string
	warnings []string

	id, model, fingerprint string
	blocks                 int
	textID, reasoningID    string
	calls                  map[int]*toolCall
	order                  []int
	finishRaw              string
	flushed                bool
	usage                  engine.Usage
}

// Event handles one SSE event.
func (h *handler) Event(ev wire.Event, emit func(engine.StreamPart)) (bool, error) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, []byte("[DONE]")) {
		h.complete(emit)
		return true, nil
	}
	if ev.Type == "error" {
		return false, wire.StreamError(data)
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, wire.Errorf("decoding stream chunk: %v", err)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, wire.StreamError(data)
	}
	if c.ID != "" {
		h.id, h.model, h.fingerprint = c.ID, c.Model, c.SystemFingerprint
	}
	if u := c.Usage; u != nil {
		h.usage = engine.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if h.usage.TotalTokens == 0 {
			h.usage.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		if d := u.PromptTokensDetails; d != nil {
			h.usage.CachedInputTokens = d.CachedTokens
		}
		if d := u.CompletionTokensDetails; d != nil {
			h.usage.ReasoningTokens = d.ReasoningTokens
		}
	}
	for _, ch := range c.Choices {
		// Only the first choice is a model step; n > 1 is not requested.
		if ch.Index != 0 || h.flushed {
			continue
		}
		if err := h.choice(ch, emit); err != nil {
			return false, err
		}
	}
	return false, nil
}

// choice handles the delta of choice 0.
func (h *handler) choice(ch choice, emit func(engine.StreamPart)) error {
	d := ch.Delta
	for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
		if r != nil && *r != "" {
			h.closeText(emit)
			if h.reasoningID == "" {
				h.reasoningID = h.nextID("reasoning")
				emit(engine.StreamPart{Type: engine.StreamReasoningStart, ID: h.reasoningID})
			}
			emit(engine.StreamPart{Type: engine.StreamReasoningDelta, ID: h.reasoningID, Text: *r})
		}
	}
	for _, t := range []*string{d.Content, d.Refusal} {
		if t != nil && *t != "" {
			h.closeReasoning(emit)
			if h.textID == "" {
				h.textID = h.nextID("text")
				emit(engine.StreamPart{Type: engine.StreamTextStart, ID: h.textID})
			}
			emit(engine.StreamPart{Type: engine.StreamTextDelta, ID: h.textID, Text: *t})
		}
	}
	for _, tc := range d.ToolCalls {
		if err := h.toolCall(tc, emit); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		h.finishRaw = *ch.FinishReason
		h.flush(emit)
	}
	return nil
}

// toolCall merges one tool-call fragment: the first one opens the call
// (tool-input-start), every arguments piece is a tool-input-delta.
func (h *handler) toolCall(tc toolCallDelta, emit func(engine.StreamPart)) error {
	if h.calls == nil {
		h.calls = map[int]*toolCall{}
	}
	c, ok := h.calls[tc.Index]
	if !ok {
		if len(h.calls) >= MaxToolCalls {
			return wire.Errorf("stream has more than %d tool calls", MaxToolCalls)
		}
		h.closeReasoning(emit)
		c = &toolCall{}
		h.calls[tc.Index] = c
		h.order = append(h.order, tc.Index)
	}
	if tc.ID != "" && c.id == "" {
		c.id = tc.ID
	}
	if tc.Function.Name != "" {
		c.name = tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
	if !c.started && c.name != "" {
		h.start(c, tc.Index, emit)
		if c.args.Len() > 0 {
			emit(engine.StreamPart{Type: engine.StreamToolInputDelta, ID: c.id, ToolCallID: c.id, Text: c.args.String()})
		}
	} else if c.started && tc.Function.Arguments != "" {
		emit(engine.StreamPart{Type: engine.StreamToolInputDelta, ID: c.id, ToolCallID: c.id, Text: tc.Function.Arguments})
	}
	return nil
}

// start emits a call's tool-input-start, inventing an id if the server
// sent none (the SDK does the same).
func (h *handler) start(c *toolCall, index int, emit func(engine.StreamPart)) {
	if c.id == "" {
		c.id = fmt.Sprintf("call_%s_%d", h.id, index)
	}
	c.started = true
	emit(engine.StreamPart{Type: engine.StreamToolInputStart, ID: c.id, ToolCallID: c.id, ToolName: c.name})
}

// flush closes open blocks and emits every assembled tool call, once.
// Arguments that are not valid JSON are passed on as they are, so the
// engine reports a tool-input error to the model.
func (h *handler) flush(emit func(engine.StreamPart)) {
	if h.flushed {
		return
	}
	h.flushed = true
	h.closeReasoning(emit)
	h.closeText(emit)
	for _, i := range h.order {
		c := h.calls[i]
		if !c.started {
			h.start(c, i, emit)
		}
		input := json.RawMessage(c.args.String())
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		emit(engine.StreamPart{Type: engine.StreamToolCall, ID: c.id, ToolCallID: c.id, ToolName: c.name, Input: input})
	}
}

// complete emits the finish part after the last chunk.
func (h *handler) complete(emit func(engine.StreamPart)) {
	h.flush(emit)
	meta := map[string]any{"responseId": h.id, "model": h.model}
	if h.fingerprint != "" {
		meta["systemFingerprint"] = h.fingerprint
	}
	emit(wire.Finish(h.name, h.finishRaw, finishReasons, h.usage, meta, h.warnings))
}

// End handles a body that ends without [DONE]: complete when a finish
// reason arrived (the SDK accepts that too), truncated otherwise.
func (h *handler) End(emit func(engine.StreamPart)) error {
	if h.finishRaw == "" {
		return wire.Errorf("stream ended before a finish_reason: the response was truncated")
	}
	h.complete(emit)
	return nil
}

func (h *handler) nextID(kind string) string {
	h.blocks++
	return fmt.Sprintf("%s-%d", kind, h.blocks-1)
}

func (h *handler) closeText(emit func(engine.StreamPart)) {
	if h.textID != "" {
		emit(engine.StreamPart{Type: engine.StreamTextEnd, ID: h.textID})
		h.textID = ""
	}
}

func (h *handler) closeReasoning(emit func(engine.StreamPart)) {
	if h.reasoningID != "" {
		emit(engine.StreamPart{Type: engine.StreamReasoningEnd, ID: h.reasoningID})
		h.reasoningID = ""
	}
}
