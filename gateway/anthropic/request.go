// Package anthropic is the wire format of the gateway's Anthropic Messages
// endpoint (POST /v1/messages, protocols.md B.2): the request, decoded
// strictly with JSON paths in its errors; its conversion to the engine's
// UI messages and client tools; the response message and the named SSE
// events of a stream; the error body and the error type of each status.
package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	js "github.com/turngate/turngate/gateway/jsonshape"
)

// Request is the part of a Messages request the gateway reads. The
// sampling fields (temperature, top_k, …), metadata and the rest Anthropic
// defines are type-checked and ignored: the agent's config decides them.
type Request struct {
	Model      string      `json:"model"`
	MaxTokens  int         `json:"max_tokens"`
	Messages   []Message   `json:"messages"`
	System     Content     `json:"system"`
	Tools      []Tool      `json:"tools"`
	ToolChoice *ToolChoice `json:"tool_choice"`
	Stream     bool        `json:"stream"`
}

// Message is one message of the history.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Content is a message's (or the system prompt's) content: a string is
// one text block.
type Content []Block

// UnmarshalJSON takes a string or an array of blocks.
func (c *Content) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Block is a content block: text, image, document, thinking,
// redacted_thinking, tool_use or tool_result.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Source is an image's or a document's.
	Source *Source `json:"source,omitempty"`
	// Title is a document's.
	Title string `json:"title,omitempty"`
	// Thinking and Signature are a thinking block's; Data a redacted one's.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool_result block's.
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   Content `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
}

// Source is where an image's or a document's data is: base64 (Data with
// MediaType), url, text (a plain-text document's Data) or content.
type Source struct {
	Type      string  `json:"type"`
	MediaType string  `json:"media_type,omitempty"`
	Data      string  `json:"data,omitempty"`
	URL       string  `json:"url,omitempty"`
	FileID    string  `json:"file_id,omitempty"`
	Content   Content `json:"content,omitempty"`
}

// Tool is a tool the request declares: a client tool.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolChoice is the request's tool_choice: auto, any, tool (Name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

var (
	cacheControl = js.Object(js.Fields{"type": js.String(), "ttl": js.String()})
	citation     = js.Object(nil)
	textBlock    = js.Object(js.Fields{"text": js.String(), "cache_control": cacheControl, "citations": js.Array(citation)})
	source       = js.Tagged("a source object", js.Fields{
		"base64":  js.Object(js.Fields{"media_type": js.String(), "data": js.String()}),
		"url":     js.Object(js.Fields{"url": js.String()}),
		"file":    js.Object(js.Fields{"file_id": js.String()}),
		"text":    js.Object(js.Fields{"media_type": js.String(), "data": js.String()}),
		"content": js.Object(js.Fields{"content": js.OneOf("a string or an array of content blocks", js.String(), js.Array(js.Object(nil)))}),
	})
	imageBlock = js.Object(js.Fields{"source": source, "cache_control": cacheControl})
	docBlock   = js.Object(js.Fields{"source": source, "cache_control": cacheControl, "title": js.String(),
		"context": js.String(), "citations": js.Object(js.Fields{"enabled": js.Bool()})})
	// Blocks are lenient about keys they do not declare: clients send back
	// the blocks of a response, with the keys of a response block.
	block = js.Tagged("a content block", js.Fields{
		"text":              textBlock,
		"image":             imageBlock,
		"document":          docBlock,
		"thinking":          js.Object(js.Fields{"thinking": js.String(), "signature": js.String()}),
		"redacted_thinking": js.Object(js.Fields{"data": js.String()}),
		"tool_use":          js.Object(js.Fields{"id": js.String(), "name": js.String(), "input": js.Object(nil), "cache_control": cacheControl}),
		"tool_result": js.Object(js.Fields{"tool_use_id": js.String(), "is_error": js.Bool(), "cache_control": cacheControl,
			"content": js.OneOf("a string or an array of text, image and document blocks", js.String(), js.Array(js.Tagged("a content block", js.Fields{
				"text": textBlock, "image": imageBlock, "document": docBlock,
			}))),
		}),
	})
	content = js.OneOf("a string or an array of content blocks", js.String(), js.Array(block))

	// requestShape is strict at the top level, where a misspelt key
	// (max_token, tool_choise) would otherwise be a setting silently lost.
	requestShape = js.Object(js.Fields{
		"model":      js.String(),
		"max_tokens": js.IntegerIn(0, 1<<31-1),
		"messages": js.Array(js.Object(js.Fields{
			"role":    js.String(),
			"content": content,
		}).Strict()),
		"system": js.OneOf("a string or an array of text blocks", js.String(), js.Array(js.Tagged("a text block", js.Fields{"text": textBlock}))),
		"tools": js.Array(js.Object(js.Fields{
			"type": js.String(), "name": js.String(), "description": js.String(), "input_schema": js.Object(nil),
			"cache_control": cacheControl, "strict": js.Bool(), "input_examples": js.Array(js.Object(nil)),
			"defer_loading": js.Bool(), "eager_input_streaming": js.Bool(), "allowed_callers": js.Array(js.String()),
		})),
		"tool_choice": js.Tagged("a tool choice object", js.Fields{
			"auto": js.Object(js.Fields{"disable_parallel_tool_use": js.Bool()}).Strict(),
			"any":  js.Object(js.Fields{"disable_parallel_tool_use": js.Bool()}).Strict(),
			"tool": js.Object(js.Fields{"name": js.String(), "disable_parallel_tool_use": js.Bool()}).Strict(),
			"none": js.Object(js.Fields{}).Strict(),
		}),
		"stream": js.Bool(),

		// Accepted and ignored: the agent's config decides these.
		"temperature":    js.Number(0, 1),
		"top_p":          js.Number(0, 1),
		"top_k":          js.IntegerIn(0, 1<<31-1),
		"stop_sequences": js.Array(js.String()),
		"metadata":       js.Object(js.Fields{"user_id": js.String()}),
		"thinking": js.Tagged("a thinking config object", js.Fields{
			"enabled":  js.Object(js.Fields{"budget_tokens": js.Integer(), "display": js.String()}),
			"disabled": js.Object(js.Fields{}),
			"adaptive": js.Object(js.Fields{"display": js.String()}),
		}),
		"service_tier":    js.String(),
		"cache_control":   cacheControl,
		"container":       js.OneOf("a string or an object", js.String(), js.Object(nil)),
		"inference_geo":   js.String(),
		"output_config":   js.Object(nil),
		"speed":           js.String(),
		"diagnostics":     js.Object(nil),
		"user_profile_id": js.String(),
		"workspace_id":    js.String(),
	}).Strict()
)

// ErrBody is the error of a body that is not one JSON object.
var ErrBody = errors.New("the request body must be one JSON object")

// Decode checks data against the Messages request's shape and the rules
// the API sets (model, max_tokens and messages required; user and
// assistant roles; a tool choice of tool names its tool) and decodes it.
// A violation is a *jsonshape.Error naming the value's JSON path; data
// that is not JSON is the encoding/json error; JSON of another kind than
// one object wraps ErrBody.
func Decode(data []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: it is empty", ErrBody)
	} else if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: it has data after the JSON value", ErrBody)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%w, got JSON %s", ErrBody, js.Describe(doc))
	}
	if err := requestShape.Check(doc); err != nil {
		return nil, err
	}
	var req Request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err // the check passed every value: not expected
	}
	return &req, req.check(doc.(map[string]any))
}

func fieldErr(path, format string, args ...any) *js.Error {
	return &js.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// check applies the rules a shape does not say; doc is the decoded body.
func (r *Request) check(doc map[string]any) error {
	switch {
	case r.Model == "":
		return fieldErr("model", "is required: the name of one of this gateway's agents")
	case doc["max_tokens"] == nil:
		return fieldErr("max_tokens", "is required")
	case len(r.Messages) == 0:
		return fieldErr("messages", "at least one message is required")
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fieldErr(fmt.Sprintf("messages[%d].role", i), "must be user or assistant, not %q", m.Role)
		}
		if m.Content == nil {
			return fieldErr(fmt.Sprintf("messages[%d].content", i), "is required")
		}
	}
	if tc := r.ToolChoice; tc != nil && tc.Type == "tool" && tc.Name == "" {
		return fieldErr("tool_choice.name", "is required when type is tool")
	}
	return nil
}
