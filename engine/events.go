package engine

import "encoding/json"

// Event types the engine emits while a turn runs. They are the AI SDK UI
// message stream chunk types (protocols.md A.5), so the UI encoder writes
// them as they are and other encoders (OpenAI) translate them.
const (
	EventStart               = "start"
	EventStartStep           = "start-step"
	EventFinishStep          = "finish-step"
	EventTextStart           = "text-start"
	EventTextDelta           = "text-delta"
	EventTextEnd             = "text-end"
	EventReasoningStart      = "reasoning-start"
	EventReasoningDelta      = "reasoning-delta"
	EventReasoningEnd        = "reasoning-end"
	EventToolInputStart      = "tool-input-start"
	EventToolInputDelta      = "tool-input-delta"
	EventToolInputAvailable  = "tool-input-available"
	EventToolInputError      = "tool-input-error"
	EventToolOutputAvailable = "tool-output-available"
	EventToolOutputError     = "tool-output-error"
	// EventToolApprovalRequest asks the client to approve a tool call.
	EventToolApprovalRequest = "tool-approval-request"
	// EventToolOutputDenied reports a tool call whose approval was denied.
	EventToolOutputDenied = "tool-output-denied"
	EventFinish           = "finish"
	EventError            = "error"
	EventAbort            = "abort"
	// EventMessageMetadata updates the message's metadata mid-stream; the
	// engine sends it before abort, to mark the message interrupted.
	EventMessageMetadata = "message-metadata"
)

// Event is one UI message stream chunk. Only the fields of its Type are set;
// MarshalJSON writes exactly the fields the AI SDK's chunk schema expects.
type Event struct {
	Type           string          `json:"type"`
	MessageID      string          `json:"messageId,omitempty"`
	ID             string          `json:"id,omitempty"`
	Delta          string          `json:"delta,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ToolName       string          `json:"toolName,omitempty"`
	InputTextDelta string          `json:"inputTextDelta,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	ErrorText      string          `json:"errorText,omitempty"`
	// ApprovalID and Reason ride on tool-approval-request.
	ApprovalID string `json:"approvalId,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Approvers are the roles that may decide a tool-approval-request
	// (PendingApproval.Approvers); nil when the chat user may. They are
	// not sent: the gateway turns them into ApprovalDescriptor.
	Approvers []string `json:"-"`
	// ApprovalDescriptor rides on tool-approval-request: what the caller
	// tells the client about who may answer it (the AI SDK keeps it as
	// the part's approval.descriptor).
	ApprovalDescriptor json.RawMessage `json:"approvalDescriptor,omitempty"`
	FinishReason       string          `json:"finishReason,omitempty"`
	Dynamic            bool            `json:"dynamic,omitempty"`
	// ProviderExecuted marks a tool call the client must not execute: the
	// engine sets it on client tool calls that beforeToolCall blocked or
	// substituted, so the AI SDK client skips onToolCall for them.
	ProviderExecuted bool `json:"providerExecuted,omitempty"`
	// MessageMetadata rides on start, finish and message-metadata chunks.
	MessageMetadata json.RawMessage `json:"messageMetadata,omitempty"`
	// ProviderMetadata rides on reasoning-end: the provider's metadata of
	// the block (an Anthropic thinking block's signature). The UI message
	// stream leaves it out (MarshalJSON); the Anthropic endpoint sends the
	// signature.
	ProviderMetadata json.RawMessage `json:"-"`
}
