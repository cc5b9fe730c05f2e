package engine

import "encoding/json"

// Message roles, as in the AI SDK.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// UIMessage is the AI SDK's UIMessage: the unit of the persisted transcript
// and of the UI message stream (protocols.md A.4).
type UIMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Parts    []UIPart        `json:"parts"`
}

// Part types and tool part states, as in the AI SDK (protocols.md A.4).
const (
	PartText      = "text"
	PartReasoning = "reasoning"
	PartStepStart = "step-start"
	// PartToolPrefix prefixes a static tool's part type: "tool-<name>".
	PartToolPrefix = "tool-"
	// PartDynamicTool is the part type of a runtime-registered tool; its
	// name is in ToolName.
	PartDynamicTool = "dynamic-tool"
	// PartDataPrefix prefixes a custom data part's type: "data-<name>".
	PartDataPrefix = "data-"
	// PartFile is a file attachment: MediaType, URL (a data: URL or an
	// https URL) and an optional Filename.
	PartFile = "file"

	StateStreaming = "streaming"
	StateDone      = "done"

	ToolStateInputStreaming  = "input-streaming"
	ToolStateInputAvailable  = "input-available"
	ToolStateOutputAvailable = "output-available"
	ToolStateOutputError     = "output-error"
)

// UIPart is one part of a UIMessage. Which fields are set depends on Type;
// absent fields are omitted from JSON, as the AI SDK does.
type UIPart struct {
	Type  string `json:"type"`
	ID    string `json:"id,omitempty"`
	Text  string `json:"text,omitempty"`
	State string `json:"state,omitempty"`

	// Tool parts ("tool-<name>", "dynamic-tool").
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	// Approval is the tool call's approval (approval-requested,
	// approval-responded, output-denied, and output-* after an approval).
	Approval *ToolApproval `json:"approval,omitempty"`

	// Data parts ("data-<name>").
	Data json.RawMessage `json:"data,omitempty"`

	// File parts ("file").
	MediaType string `json:"mediaType,omitempty"`
	URL       string `json:"url,omitempty"`
	Filename  string `json:"filename,omitempty"`

	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
}

// IsTool reports whether the part is a tool part, static or dynamic.
func (p UIPart) IsTool() bool {
	return p.Type == PartDynamicTool || (len(p.Type) > len(PartToolPrefix) && p.Type[:len(PartToolPrefix)] == PartToolPrefix)
}

// ToolPartName returns the tool name of a tool part ("" for other parts).
func (p UIPart) ToolPartName() string {
	switch {
	case p.Type == PartDynamicTool:
		return p.ToolName
	case p.IsTool():
		return p.Type[len(PartToolPrefix):]
	}
	return ""
}

// ModelMessage is the AI SDK's ModelMessage: what is sent to a model.
// System and user text, assistant text/reasoning/tool calls, and tool results
// are all content parts.
type ModelMessage struct {
	Role    string        `json:"role"`
	Content []ContentPart `json:"content"`
}

// Content part types of a ModelMessage.
const (
	ContentText       = "text"
	ContentReasoning  = "reasoning"
	ContentToolCall   = "tool-call"
	ContentToolResult = "tool-result"
	// ContentFile is a file the user attached (the AI SDK's FilePart): its
	// MediaType, its URL (a data: URL, or a remote URL) and Filename.
	ContentFile = "file"
)

// ContentPart is one part of a ModelMessage.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`

	// Tool calls and tool results.
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	// Output is a tool result's value as the model sees it.
	Output json.RawMessage `json:"output,omitempty"`
	// IsError marks a tool result that is an error; Output then holds the
	// error text as a JSON string.
	IsError bool `json:"isError,omitempty"`

	// Files.
	MediaType string `json:"mediaType,omitempty"`
	URL       string `json:"url,omitempty"`
	Filename  string `json:"filename,omitempty"`

	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
}

// Text returns the concatenated text parts of the message.
func (m ModelMessage) Text() string {
	var s string
	for _, c := range m.Content {
		if c.Type == ContentText {
			s += c.Text
		}
	}
	return s
}
