package engine

import (
	"encoding/json"
	"strings"
)

// nullJSON is the JSON null literal, used for absent tool inputs and outputs.
var nullJSON = json.RawMessage("null")

// emptyObject is the input of a tool call whose part carries none.
var emptyObject = json.RawMessage("{}")

// ConvertToModelMessages turns a stored UI transcript into model messages,
// as the AI SDK's convertToModelMessages does (protocols.md A.12):
//
//   - system messages become one system message (text parts joined);
//   - user messages keep their text and file parts; data parts are dropped;
//   - assistant messages are split at every step-start; each block becomes
//     an assistant message (reasoning, text, a tool call per finished tool
//     part) followed by a tool message with that block's results
//     (output-available → result, output-error → error text).
//
// Tool parts without a result (input-streaming, input-available) are dropped:
// a tool call without its result is invalid for every provider. Messages
// that end up empty are omitted.
func ConvertToModelMessages(msgs []UIMessage) []ModelMessage {
	out := make([]ModelMessage, 0, len(msgs)+2)
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case RoleSystem:
			var b strings.Builder
			for _, p := range m.Parts {
				if p.Type == PartText {
					b.WriteString(p.Text)
				}
			}
			if b.Len() > 0 {
				out = append(out, ModelMessage{Role: RoleSystem, Content: []ContentPart{{Type: ContentText, Text: b.String()}}})
			}
		case RoleUser:
			var content []ContentPart
			for _, p := range m.Parts {
				switch {
				case p.Type == PartText && p.Text != "":
					content = append(content, ContentPart{Type: ContentText, Text: p.Text})
				case p.Type == PartFile && p.URL != "":
					content = append(content, ContentPart{Type: ContentFile, MediaType: p.MediaType, URL: p.URL,
						Filename: p.Filename, ProviderMetadata: p.ProviderMetadata})
				}
			}
			if len(content) > 0 {
				out = append(out, ModelMessage{Role: RoleUser, Content: content})
			}
		case RoleAssistant:
			out = appendAssistantBlocks(out, m.Parts)
		}
	}
	return out
}

// appendAssistantBlocks appends the model messages of one assistant UI
// message, one assistant (+ tool) pair per step block.
func appendAssistantBlocks(out []ModelMessage, parts []UIPart) []ModelMessage {
	start := 0
	for i := 0; i <= len(parts); i++ {
		if i < len(parts) && parts[i].Type != PartStepStart {
			continue
		}
		out = appendAssistantBlock(out, parts[start:i])
		start = i + 1
	}
	return out
}

func appendAssistantBlock(out []ModelMessage, block []UIPart) []ModelMessage {
	var content, results []ContentPart
	for _, p := range block {
		switch {
		case p.Type == PartText && p.Text != "":
			content = append(content, ContentPart{Type: ContentText, Text: p.Text, ProviderMetadata: p.ProviderMetadata})
		case p.Type == PartReasoning && p.Text != "":
			content = append(content, ContentPart{Type: ContentReasoning, Text: p.Text, ProviderMetadata: p.ProviderMetadata})
		case p.IsTool():
			var result ContentPart
			switch p.State {
			case ToolStateOutputAvailable:
				result = ContentPart{Type: ContentToolResult, Output: orNull(p.Output)}
			case ToolStateOutputError:
				result = ContentPart{Type: ContentToolResult, Output: jsonString(p.ErrorText), IsError: true}
			case ToolStateOutputDenied:
				var reason string
				if p.Approval != nil {
					reason = p.Approval.Reason
				}
				result = ContentPart{Type: ContentToolResult, Output: jsonString(deniedText(reason)), IsError: true}
			default:
				continue
			}
			name := p.ToolPartName()
			input := p.Input
			if len(input) == 0 {
				input = emptyObject
			}
			content = append(content, ContentPart{Type: ContentToolCall, ToolCallID: p.ToolCallID, ToolName: name, Input: input})
			result.ToolCallID, result.ToolName = p.ToolCallID, name
			results = append(results, result)
		}
	}
	if len(content) > 0 {
		out = append(out, ModelMessage{Role: RoleAssistant, Content: content})
	}
	if len(results) > 0 {
		out = append(out, ModelMessage{Role: RoleTool, Content: results})
	}
	return out
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nullJSON
	}
	return v
}

// jsonString encodes s as a JSON string value.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}
