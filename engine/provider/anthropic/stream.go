package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/internal/wire"
)

// event is any Messages stream event; which fields are set depends on Type.
type event struct {
	Type         string          `json:"type"`
	Message      *message        `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *contentBlock   `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        *usage          `json:"usage"`
}

type message struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage usage  `json:"usage"`
}

type contentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
	Data     string `json:"data"`
	ID       string `json:"id"`
	Name     string `json:"name"`
}

// delta is a content_block_delta's or a message_delta's delta.
type delta struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	PartialJSON  string  `json:"partial_json"`
	Thinking     string  `json:"thinking"`
	Signature    string  `json:"signature"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// usage counters; message_delta repeats them as cumulative totals, so a
// non-nil value overwrites.
type usage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// merge overwrites u's counters with v's non-nil ones.
func (u *usage) merge(v *usage) {
	if v == nil {
		return
	}
	for _, f := range []struct{ dst, src **int }{
		{&u.InputTokens, &v.InputTokens}, {&u.OutputTokens, &v.OutputTokens},
		{&u.CacheCreationInputTokens, &v.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &v.CacheReadInputTokens},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// MaxBlocks bounds the content blocks of one message; the index comes from
// the server.
const MaxBlocks = 1024

// block is a content block being streamed.
type block struct {
	kind      string // "text", "reasoning" or "tool"
	id, name  string
	input     strings.Builder
	signature string
}

// finishReasons maps stop_reason to the AI SDK's finish reasons.
var finishReasons = map[string]string{
	"end_turn":                      engine.FinishStop,
	"stop_sequence":                 engine.FinishStop,
	"max_tokens":                    engine.FinishLength,
	"model_context_window_exceeded": engine.FinishLength,
	"tool_use":                      engine.FinishToolCalls,
	"refusal":                       engine.FinishContentFilter,
}

// handler assembles Messages events into stream parts.
type handler struct {
	name     string
	warnings []string

	started      bool
	id, model    string
	blocks       map[int]*block
	stopReason   string
	stopSequence string
	usage        usage
}

// Event handles one SSE event.
func (h *handler) Event(ev wire.Event, emit func(engine.StreamPart)) (bool, error) {
	var e event
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return false, wire.Errorf("decoding %q event: %v", ev.Type, err)
	}
	if e.Type == "" {
		e.Type = ev.Type
	}
	switch e.Type {
	case "message_start":
		if h.started {
			return false, wire.Errorf("unexpected event order: a second message_start")
		}
		h.started = true
		if e.Message != nil {
			h.id, h.model = e.Message.ID, e.Message.Model
			h.usage.merge(&e.Message.Usage)
		}
	case "content_block_start":
		return false, h.blockStart(e, emit)
	case "content_block_delta":
		return false, h.blockDelta(e, emit)
	case "content_block_stop":
		h.blockStop(e.Index, emit)
	case "message_delta":
		var d delta
		_ = json.Unmarshal(e.Delta, &d)
		if d.StopReason != nil {
			h.stopReason = *d.StopReason
		}
		if d.StopSequence != nil {
			h.stopSequence = *d.StopSequence
		}
		h.usage.merge(e.Usage)
	case "message_stop":
		h.complete(emit)
		return true, nil
	case "error":
		return false, wire.StreamError(ev.Data)
	}
	// ping and event types added later are ignored, as the SDK does.
	return false, nil
}

func (h *handler) blockStart(e event, emit func(engine.StreamPart)) error {
	cb := e.ContentBlock
	if cb == nil {
		return wire.Errorf("content_block_start %d without a content_block", e.Index)
	}
	if h.blocks == nil {
		h.blocks = map[int]*block{}
	}
	if len(h.blocks) >= MaxBlocks {
		return wire.Errorf("message has more than %d content blocks", MaxBlocks)
	}
	switch cb.Type {
	case "text":
		b := &block{kind: "text", id: fmt.Sprintf("text-%d", e.Index)}
		h.blocks[e.Index] = b
		emit(engine.StreamPart{Type: engine.StreamTextStart, ID: b.id})
		if cb.Text != "" {
			emit(engine.StreamPart{Type: engine.StreamTextDelta, ID: b.id, Text: cb.Text})
		}
	case "thinking":
		b := &block{kind: "reasoning", id: fmt.Sprintf("reasoning-%d", e.Index)}
		h.blocks[e.Index] = b
		emit(engine.StreamPart{Type: engine.StreamReasoningStart, ID: b.id})
		if cb.Thinking != "" {
			emit(engine.StreamPart{Type: engine.StreamReasoningDelta, ID: b.id, Text: cb.Thinking})
		}
	case "redacted_thinking":
		// Encrypted reasoning: nothing to show, but it must go back to the
		// API with the next request, so it rides in providerMetadata.
		id := fmt.Sprintf("reasoning-%d", e.Index)
		meta, _ := json.Marshal(map[string]any{h.name: map[string]string{"redactedData": cb.Data}})
		emit(engine.StreamPart{Type: engine.StreamReasoningStart, ID: id})
		emit(engine.StreamPart{Type: engine.StreamReasoningEnd, ID: id, ProviderMetadata: meta})
	case "tool_use":
		b := &block{kind: "tool", id: cb.ID, name: cb.Name}
		h.blocks[e.Index] = b
		emit(engine.StreamPart{Type: engine.StreamToolInputStart, ID: b.id, ToolCallID: b.id, ToolName: b.name})
	}
	return nil
}

func (h *handler) blockDelta(e event, emit func(engine.StreamPart)) error {
	b, ok := h.blocks[e.Index]
	if !ok {
		return nil // the SDK ignores deltas of unknown blocks too
	}
	var d delta
	if err := json.Unmarshal(e.Delta, &d); err != nil {
		return wire.Errorf("decoding content_block_delta %d: %v", e.Index, err)
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			emit(engine.StreamPart{Type: engine.StreamTextDelta, ID: b.id, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			emit(engine.StreamPart{Type: engine.StreamReasoningDelta, ID: b.id, Text: d.Thinking})
		}
	case "signature_delta":
		b.signature = d.Signature
	case "input_json_delta":
		if d.PartialJSON != "" {
			b.input.WriteString(d.PartialJSON)
			emit(engine.StreamPart{Type: engine.StreamToolInputDelta, ID: b.id, ToolCallID: b.id, Text: d.PartialJSON})
		}
	}
	return nil
}

// blockStop closes a block; a tool_use block becomes its tool call. Input
// that is not valid JSON is passed on as it is, so the engine reports a
// tool-input error to the model.
func (h *handler) blockStop(index int, emit func(engine.StreamPart)) {
	b, ok := h.blocks[index]
	if !ok {
		return
	}
	delete(h.blocks, index)
	switch b.kind {
	case "text":
		emit(engine.StreamPart{Type: engine.StreamTextEnd, ID: b.id})
	case "reasoning":
		var meta json.RawMessage
		if b.signature != "" {
			meta, _ = json.Marshal(map[string]any{h.name: map[string]string{"signature": b.signature}})
		}
		emit(engine.StreamPart{Type: engine.StreamReasoningEnd, ID: b.id, ProviderMetadata: meta})
	case "tool":
		input := json.RawMessage(b.input.String())
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		emit(engine.StreamPart{Type: engine.StreamToolCall, ID: b.id, ToolCallID: b.id, ToolName: b.name, Input: input})
	}
}

// complete emits the finish part.
func (h *handler) complete(emit func(engine.StreamPart)) {
	val := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	u := h.usage
	cacheWrite, cacheRead := val(u.CacheCreationInputTokens), val(u.CacheReadInputTokens)
	out := engine.Usage{
		InputTokens:       val(u.InputTokens) + cacheWrite + cacheRead,
		OutputTokens:      val(u.OutputTokens),
		CachedInputTokens: cacheRead,
	}
	out.TotalTokens = out.InputTokens + out.OutputTokens
	meta := map[string]any{"messageId": h.id, "model": h.model,
		"cacheCreationInputTokens": cacheWrite, "cacheReadInputTokens": cacheRead}
	if h.stopSequence != "" {
		meta["stopSequence"] = h.stopSequence
	}
	emit(wire.Finish(h.name, h.stopReason, finishReasons, out, meta, h.warnings))
}

// End handles a body that ends without message_stop: complete when the
// stop reason arrived, truncated otherwise.
func (h *handler) End(emit func(engine.StreamPart)) error {
	if h.stopReason == "" {
		return wire.Errorf("stream ended before message_stop: the response was truncated")
	}
	h.complete(emit)
	return nil
}
