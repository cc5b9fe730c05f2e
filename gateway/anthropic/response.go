package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/uistream"
)

// DefaultPingInterval is how long a stream stays silent before KeepAlive
// sends a ping event, Anthropic's own keep-alive: well under the 60 s idle
// cut of common proxies and load balancers.
const DefaultPingInterval = 15 * time.Second

// Encoder turns one turn's engine events into a Messages response: the
// named SSE events of a stream (protocols.md B.2) in its Buffer, and the
// message a non-streaming request answers. Text and thinking blocks are
// streamed as the model sends them, one content block each; server tool
// calls run inside the gateway and are not shown (the protocol has no
// event for a result the server produced); the client tool calls the turn
// ends with become tool_use blocks at its end. A ping event follows
// message_start, and KeepAlive adds one whenever the stream is silent (a
// slow tool, a model thinking long).
type Encoder struct {
	id, model string
	// stream is false for a non-streaming response: no frames are kept.
	stream  bool
	buf     *uistream.Buffer
	started bool
	// blocks is the message's content, text its text and thinking blocks'
	// text so far; open is the index of the block being streamed (-1:
	// none).
	blocks []map[string]any
	text   []strings.Builder
	open   int
	// content is closed with the first content delta.
	content     chan struct{}
	contentOnce sync.Once
}

// NewEncoder returns the encoder of a response with message id id for
// the request's model; stream says whether it is a stream.
func NewEncoder(id, model string, stream bool) *Encoder {
	return &Encoder{id: id, model: model, stream: stream, buf: uistream.NewBuffer(), open: -1, content: make(chan struct{})}
}

// Buffer holds the stream's frames; End and Fail end it.
func (e *Encoder) Buffer() *uistream.Buffer { return e.buf }

// Content is closed when the first text or thinking delta, or the first
// tool call, is encoded: the model has answered, and the stream (whose
// tools may take long) is committed to its 200.
func (e *Encoder) Content() <-chan struct{} { return e.content }

// KeepAlive appends a ping event to the stream each time it stayed silent
// for every, from message_start on, until the stream ends or ctx is done;
// run it beside the turn. It does nothing for a non-streaming response.
func (e *Encoder) KeepAlive(ctx context.Context, every time.Duration) {
	if !e.stream {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if e.buf.Closed() {
			return
		}
		// Frames are whole events: a ping between two of the turn's is
		// still a well-formed stream. message_start is the first frame.
		n := e.buf.Len()
		if n > 0 && n == seen {
			e.buf.Append(Frame("ping", map[string]any{}))
			n++
		}
		seen = n
	}
}

// HasContent reports whether Content is closed.
func (e *Encoder) HasContent() bool {
	select {
	case <-e.content:
		return true
	default:
		return false
	}
}

// Frame is one named SSE event: "event: TYPE" and the data line of v,
// whose "type" is TYPE.
func Frame(typ string, v map[string]any) []byte {
	v["type"] = typ
	data, _ := json.Marshal(v) // maps of JSON values only
	out := make([]byte, 0, len(typ)+len(data)+16)
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, "\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

func (e *Encoder) send(typ string, v map[string]any) {
	if e.stream {
		e.buf.Append(Frame(typ, v))
	}
}

// start sends message_start and the first ping.
func (e *Encoder) start() {
	if e.started {
		return
	}
	e.started = true
	e.send("message_start", map[string]any{"message": e.message(nil, nil, usage(engine.Usage{}))})
	e.send("ping", map[string]any{})
}

// message is the message object with content (message_start's is empty).
func (e *Encoder) message(content []map[string]any, stop any, u map[string]any) map[string]any {
	if content == nil {
		content = []map[string]any{}
	}
	return map[string]any{"id": e.id, "type": "message", "role": "assistant", "model": e.model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": u}
}

func usage(u engine.Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": u.CachedInputTokens}
}

// openBlock starts a content block.
func (e *Encoder) openBlock(block map[string]any) {
	e.closeBlock()
	e.open = len(e.blocks)
	start := map[string]any{}
	for k, v := range block {
		start[k] = v
	}
	if block["type"] == "tool_use" {
		start["input"] = map[string]any{}
	}
	e.blocks = append(e.blocks, block)
	e.text = append(e.text, strings.Builder{})
	e.send("content_block_start", map[string]any{"index": e.open, "content_block": start})
}

func (e *Encoder) delta(d map[string]any) {
	e.send("content_block_delta", map[string]any{"index": e.open, "delta": d})
}

func (e *Encoder) closeBlock() {
	if e.open < 0 {
		return
	}
	e.send("content_block_stop", map[string]any{"index": e.open})
	e.open = -1
}

// Event encodes one engine event (called from the turn's goroutine).
func (e *Encoder) Event(ev engine.Event) {
	e.start()
	switch ev.Type {
	case engine.EventTextStart:
		e.openBlock(map[string]any{"type": "text", "text": ""})
	case engine.EventReasoningStart:
		e.openBlock(map[string]any{"type": "thinking", "thinking": "", "signature": ""})
	case engine.EventTextDelta, engine.EventReasoningDelta:
		if e.open < 0 || ev.Delta == "" {
			return
		}
		e.text[e.open].WriteString(ev.Delta)
		if e.blocks[e.open]["type"] == "text" {
			e.delta(map[string]any{"type": "text_delta", "text": ev.Delta})
		} else {
			e.delta(map[string]any{"type": "thinking_delta", "thinking": ev.Delta})
		}
		e.contentOnce.Do(func() { close(e.content) })
	case engine.EventReasoningEnd:
		if sig := signature(ev.ProviderMetadata); sig != "" && e.open >= 0 {
			e.blocks[e.open]["signature"] = sig
			e.delta(map[string]any{"type": "signature_delta", "signature": sig})
		}
		e.closeBlock()
	case engine.EventTextEnd:
		e.closeBlock()
	case engine.EventToolInputAvailable:
		e.contentOnce.Do(func() { close(e.content) })
	}
}

// signature is a thinking block's signature in a reasoning part's
// provider metadata (any provider's key; anthropic first).
func signature(meta json.RawMessage) string {
	var m map[string]struct {
		Signature string `json:"signature"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	if s := m["anthropic"].Signature; s != "" {
		return s
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if m[k].Signature != "" {
			return m[k].Signature
		}
	}
	return ""
}

// End appends what follows the model's blocks after a completed turn:
// notice (a text block, when set: the gateway's word on calls awaiting
// approval), the pending client tool calls as tool_use blocks,
// message_delta and message_stop. It ends the buffer.
func (e *Encoder) End(res *engine.TurnResult, notice string) {
	defer e.buf.End()
	e.start()
	e.finish(res, notice)
	e.send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": StopReason(res), "stop_sequence": nil},
		"usage": usage(res.Usage)})
	e.send("message_stop", map[string]any{})
}

// finish adds the notice and tool_use blocks.
func (e *Encoder) finish(res *engine.TurnResult, notice string) {
	e.closeBlock()
	if notice != "" {
		e.openBlock(map[string]any{"type": "text", "text": ""})
		e.text[e.open].WriteString(notice)
		e.delta(map[string]any{"type": "text_delta", "text": notice})
	}
	for _, tc := range res.PendingToolCalls {
		input := tc.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		e.openBlock(map[string]any{"type": "tool_use", "id": tc.ToolCallID, "name": tc.ToolName, "input": input})
		e.delta(map[string]any{"type": "input_json_delta", "partial_json": ""})
		e.delta(map[string]any{"type": "input_json_delta", "partial_json": string(input)})
	}
	e.closeBlock()
}

// Fail ends the stream with an error event of type typ (ErrorType) after
// the 200, as the API does; the buffer is ended.
func (e *Encoder) Fail(typ, message string) {
	defer e.buf.End()
	e.start()
	e.send("error", map[string]any{"error": map[string]any{"type": typ, "message": message}})
}

// Message is the non-streaming response of a completed turn: the blocks
// the events brought, then notice and the tool_use blocks.
func (e *Encoder) Message(res *engine.TurnResult, notice string) map[string]any {
	e.finish(res, notice)
	for i, b := range e.blocks {
		switch b["type"] {
		case "text":
			b["text"] = e.text[i].String()
		case "thinking":
			b["thinking"] = e.text[i].String()
		}
	}
	return e.message(e.blocks, StopReason(res), usage(res.Usage))
}

// StopReason maps a turn's end to the message's stop_reason.
func StopReason(res *engine.TurnResult) string {
	if len(res.PendingToolCalls) > 0 {
		return "tool_use"
	}
	switch res.FinishReason {
	case engine.FinishLength:
		return "max_tokens"
	case engine.FinishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

// StatusOverloaded is Anthropic's 529: the API (here, the upstream model
// or the gateway) is overloaded; clients retry it.
const StatusOverloaded = 529

// ErrorType is the error.type of an HTTP status (the SDK's classes).
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusUnsupportedMediaType:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return "timeout_error"
	case StatusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// ErrorBody is an error response's body.
func ErrorBody(status int, message, requestID string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": ErrorType(status), "message": message}, "request_id": requestID}
}
