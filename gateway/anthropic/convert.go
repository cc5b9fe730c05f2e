package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/dataurl"
)

// FileCheck checks one file part the history brings (an image or a
// document block as a file part) and returns it as it is to be kept; field
// is the block's JSON path. The gateway's attachment limits apply there.
type FileCheck func(p engine.UIPart, field string) (engine.UIPart, error)

// History converts the request's system prompt and messages to UI
// messages: text, file parts for images and documents (through check),
// reasoning parts for thinking blocks (their signature kept as
// providerMetadata.anthropic), tool parts for tool_use blocks, completed
// by the tool_result blocks of the next user message. Errors are
// *jsonshape.Error naming the offending value, or check's.
func (r *Request) History(check FileCheck) ([]engine.UIMessage, error) {
	var out []engine.UIMessage
	if text := r.System.text(); text != "" {
		out = append(out, engine.UIMessage{ID: "msg_system", Role: engine.RoleSystem, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}})
	}
	toolPart := map[string][2]int{} // tool_use id → (message, part)
	for i, m := range r.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		msg := engine.UIMessage{ID: fmt.Sprintf("msg_%d", i), Role: engine.RoleUser}
		if m.Role == "assistant" {
			msg.Role, msg.Parts = engine.RoleAssistant, []engine.UIPart{{Type: engine.PartStepStart}}
		}
		for j, b := range m.Content {
			bf := fmt.Sprintf("%s.content[%d]", field, j)
			var part *engine.UIPart
			switch {
			case b.Type == "text":
				if b.Text != "" {
					part = &engine.UIPart{Type: engine.PartText, Text: b.Text}
				}
			case b.Type == "image" || b.Type == "document":
				if m.Role != "user" {
					return nil, fieldErr(bf+".type", "an %s block belongs in a user message", b.Type)
				}
				p, err := b.file(bf)
				if err != nil {
					return nil, err
				}
				p, err = check(p, bf)
				if err != nil {
					return nil, err
				}
				part = &p
			case b.Type == "tool_result":
				if m.Role != "user" {
					return nil, fieldErr(bf+".type", "a tool_result block belongs in a user message")
				}
				at, ok := toolPart[b.ToolUseID]
				if !ok {
					return nil, fieldErr(bf+".tool_use_id", "names no tool_use block of an earlier assistant message")
				}
				delete(toolPart, b.ToolUseID) // answered once
				// A tool's output is JSON or text to the engine: an image or
				// a document inside a tool result would be lost.
				for k, c := range b.Content {
					if c.Type != "text" {
						return nil, fieldErr(fmt.Sprintf("%s.content[%d]", bf, k),
							"a tool_result's content may hold text blocks only, not %s: send the %s in the user message beside the tool_result", c.Type, c.Type)
					}
				}
				p := &out[at[0]].Parts[at[1]]
				text := b.Content.text()
				if b.IsError {
					p.State, p.ErrorText = engine.ToolStateOutputError, text
				} else {
					p.State, p.Output = engine.ToolStateOutputAvailable, jsonOrString(text)
				}
			case m.Role != "assistant":
				return nil, fieldErr(bf+".type", "a %s block belongs in an assistant message", b.Type)
			case b.Type == "thinking":
				meta, _ := json.Marshal(map[string]any{"anthropic": map[string]string{"signature": b.Signature}})
				part = &engine.UIPart{Type: engine.PartReasoning, Text: b.Thinking, State: engine.StateDone, ProviderMetadata: meta}
			case b.Type == "redacted_thinking":
				meta, _ := json.Marshal(map[string]any{"anthropic": map[string]string{"redactedData": b.Data}})
				part = &engine.UIPart{Type: engine.PartReasoning, State: engine.StateDone, ProviderMetadata: meta}
			case b.Type == "tool_use":
				if b.ID == "" || b.Name == "" {
					return nil, fieldErr(bf, "a tool_use block needs an id and a name")
				}
				input := b.Input
				if len(input) == 0 || string(input) == "null" {
					input = json.RawMessage("{}")
				}
				toolPart[b.ID] = [2]int{len(out), len(msg.Parts)}
				part = &engine.UIPart{Type: engine.PartToolPrefix + b.Name, ToolCallID: b.ID, State: engine.ToolStateInputAvailable, Input: input}
			}
			if part != nil {
				if part.Type == engine.PartText && msg.Role == engine.RoleAssistant {
					part.State = engine.StateDone
				}
				msg.Parts = append(msg.Parts, *part)
			}
		}
		// A user message of tool results only continues the assistant's.
		if msg.Role == engine.RoleAssistant || len(msg.Parts) > 0 {
			out = append(out, msg)
		}
	}
	if len(out) == 0 || out[len(out)-1].Role == engine.RoleSystem {
		return nil, fieldErr("messages", "the messages have no content")
	}
	return out, nil
}

// text is the content's text blocks, joined.
func (c Content) text() string {
	var texts []string
	for _, b := range c {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// jsonOrString is a tool result's text as the tool's output: the JSON it
// holds, or the text as a JSON string.
func jsonOrString(text string) json.RawMessage {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	out, _ := json.Marshal(text)
	return out
}

// imageTypes are the media types an image block may have (Anthropic's).
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// file converts an image or document block to a file part: base64 data
// and plain text as a data: URL, a url source as the URL (its media type
// from its extension for an image; a document URL is a PDF).
func (b Block) file(field string) (engine.UIPart, error) {
	src := b.Source
	if src == nil {
		return engine.UIPart{}, fieldErr(field+".source", "is required")
	}
	p := engine.UIPart{Type: engine.PartFile, Filename: b.Title}
	switch src.Type {
	case "base64":
		if _, err := base64.StdEncoding.DecodeString(src.Data); err != nil {
			return engine.UIPart{}, fieldErr(field+".source.data", "is not base64: %v", err)
		}
		if b.Type == "image" && !imageTypes[src.MediaType] {
			return engine.UIPart{}, fieldErr(field+".source.media_type", "must be image/jpeg, image/png, image/gif or image/webp, not %q", src.MediaType)
		}
		p.MediaType, p.URL = src.MediaType, dataurl.EncodeBase64(src.MediaType, src.Data)
	case "text":
		if b.Type != "document" {
			return engine.UIPart{}, fieldErr(field+".source.type", "a text source belongs in a document block")
		}
		p.MediaType, p.URL = "text/plain", dataurl.Encode("text/plain", []byte(src.Data))
	case "url":
		p.URL, p.MediaType = src.URL, "application/pdf"
		if b.Type == "image" {
			u, err := url.Parse(src.URL)
			if err != nil {
				return engine.UIPart{}, fieldErr(field+".source.url", "is not a URL: %v", err)
			}
			p.MediaType, _, _ = mime.ParseMediaType(mime.TypeByExtension(path.Ext(u.Path)))
			if !imageTypes[p.MediaType] {
				return engine.UIPart{}, fieldErr(field+".source.url", "does not end in .jpg, .png, .gif or .webp: send the image as base64")
			}
		}
	default:
		return engine.UIPart{}, fieldErr(field+".source.type", "%s sources are not supported here (the gateway has no Files API): send base64, text or a url", src.Type)
	}
	return p, nil
}

// ClientTools returns the request's tools as client tools, refusing a name that
// shadows one of the agent's server tools, and its tool_choice as the
// engine's (nil for auto). server names the agent's server tools.
func (r *Request) ClientTools(server []string) ([]engine.Tool, *engine.ToolChoice, error) {
	known := map[string]bool{}
	for _, n := range server {
		known[n] = true
	}
	var out []engine.Tool
	for i, t := range r.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "" && t.Type != "custom":
			return nil, nil, fieldErr(field+".type", "only custom tools are supported, not %q: the gateway's agents bring their own server tools", t.Type)
		case t.Name == "":
			return nil, nil, fieldErr(field+".name", "is required")
		case known[t.Name]:
			return nil, nil, fieldErr(field+".name", "%q is a server tool of this agent, or declared twice", t.Name)
		case t.InputSchema == nil:
			return nil, nil, fieldErr(field+".input_schema", "is required")
		}
		known[t.Name] = true
		out = append(out, engine.Tool{ToolInfo: engine.ToolInfo{Name: t.Name, Description: t.Description,
			InputSchema: t.InputSchema, Kind: engine.ToolKindClient}})
	}
	tc := r.ToolChoice
	if tc == nil {
		return out, nil, nil
	}
	switch tc.Type {
	case "any":
		return out, &engine.ToolChoice{Type: engine.ToolChoiceRequired}, nil
	case "none":
		return out, &engine.ToolChoice{Type: engine.ToolChoiceNone}, nil
	case "tool":
		if !known[tc.Name] {
			return nil, nil, fieldErr("tool_choice.name", "names no tool of this request or agent: %q", tc.Name)
		}
		return out, &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: tc.Name}, nil
	}
	return out, nil, nil
}
