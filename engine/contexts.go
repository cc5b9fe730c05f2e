package engine

import (
	"encoding/json"
	"time"
)

// Entry paths: how a turn was started (Think's entry paths, think-implementation.md §1.3).
const (
	EntryChat             = "chat"
	EntrySaveMessages     = "saveMessages"
	EntrySubmitMessages   = "submitMessages"
	EntryContinueLastTurn = "continueLastTurn"
	EntryToolResult       = "toolResult"
	EntrySubAgent         = "subAgent"
	EntryOpenAI           = "openai"
	EntryAnthropic        = "anthropic"
)

// Principal is the authenticated caller a turn runs for.
type Principal struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject"`
	Roles   []string `json:"roles"`
}

// Identity identifies the turn a hook fires for. Every hook context embeds
// it (Think leaves these out; its users keep asking for them).
type Identity struct {
	RequestID string    `json:"requestId"`
	SessionID string    `json:"sessionId"`
	Agent     string    `json:"agent"`
	Principal Principal `json:"principal"`
	// EntryPath is one of the Entry constants.
	EntryPath string `json:"entryPath"`
	// Depth is the sub-agent nesting depth (0 for a top-level turn).
	Depth int `json:"depth,omitempty"`
	// Deadline is when the turn's time runs out (the gateway's
	// limits.turnTimeout, or sooner its timeout.totalMs once beforeTurn
	// set one), as the hook is called; zero when it has none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Aborted reports that the turn's abort signal had fired when the hook
	// was called: the client cancelled or went away, the turn timed out, or
	// the gateway is shutting down. Work for the turn is then wasted.
	Aborted bool `json:"aborted,omitempty"`
}

// TurnContext is what beforeTurn sees: the fully assembled context.
type TurnContext struct {
	Identity
	System       string         `json:"system"`
	Messages     []ModelMessage `json:"messages"`
	Tools        []ToolInfo     `json:"tools"`
	Model        string         `json:"model"`
	Continuation bool           `json:"continuation"`
	Body         map[string]any `json:"body,omitempty"`
	// MaxSteps is the step budget before overrides.
	MaxSteps int `json:"maxSteps"`
	// Context maps the agent's context blocks to their content (the
	// system prompt was built from them); nil without context blocks.
	Context map[string]string `json:"context,omitempty"`
	// Compacted reports that a summary (Summary) replaces the older part
	// of the conversation the model is sent.
	Compacted bool   `json:"compacted,omitempty"`
	Summary   string `json:"summary,omitempty"`
	// Attachments are the files of the last user message.
	Attachments []Attachment `json:"attachments,omitempty"`
	// State holds the declared state the beforeTurn rules read (CEL's
	// state variable; policy/state.Values), as read before the turn; nil
	// when they read none.
	State map[string]any `json:"state,omitempty"`
}

// ToolChoice types (the AI SDK's ToolChoice).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceTool     = "tool"
)

// ToolChoice is "auto", "none", "required" or {type:"tool", toolName}. It
// marshals as a string for the first three and as an object for "tool".
type ToolChoice struct {
	Type     string `json:"type"`
	ToolName string `json:"toolName,omitempty"`
}

// Stop condition types. Stop conditions are data, not functions, so rules
// can produce them.
const (
	StopStepCount   = "stepCount"
	StopHasToolCall = "hasToolCall"
)

// StopCondition ends the loop after a step when it matches. Conditions are
// OR-combined with the always-present maxSteps bound.
type StopCondition struct {
	Type string `json:"type"`
	// Count is the number of completed steps for StopStepCount.
	Count int `json:"count,omitempty"`
	// ToolName is the tool whose call ends the loop for StopHasToolCall.
	ToolName string `json:"toolName,omitempty"`
}

// TimeoutConfig bounds a turn's model streaming: TotalMs the whole turn,
// ChunkMs the gap between two chunks of one model stream. Zero means no bound.
type TimeoutConfig struct {
	TotalMs int64 `json:"totalMs,omitempty"`
	ChunkMs int64 `json:"chunkMs,omitempty"`
}

// TelemetryConfig says what a traced turn puts on its OpenTelemetry spans
// besides their metadata (the reference's per-call telemetry settings).
// Both default to false: no message content on a span.
type TelemetryConfig struct {
	// RecordInputs records each model call's system prompt and input
	// messages (gen_ai.system_instructions, gen_ai.input.messages) and
	// each tool call's input (gen_ai.tool.call.arguments).
	RecordInputs bool `json:"recordInputs"`
	// RecordOutputs records each model call's output message
	// (gen_ai.output.messages) and each tool call's result as the model
	// sees it (gen_ai.tool.call.result).
	RecordOutputs bool `json:"recordOutputs"`
}

// OutputSpec asks for structured output: the final answer must be JSON that
// validates against Schema; its parsed value is returned in TurnResult.Output.
type OutputSpec struct {
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema"`
}

// TurnConfig is what beforeTurn returns: overrides for this turn. Nil fields
// keep the default. Tools and StopWhen are additive.
type TurnConfig struct {
	Model            *string           `json:"model,omitempty"`
	System           *string           `json:"system,omitempty"`
	Messages         *[]ModelMessage   `json:"messages,omitempty"`
	Tools            []Tool            `json:"tools,omitempty"`
	ActiveTools      *[]string         `json:"activeTools,omitempty"`
	ToolChoice       *ToolChoice       `json:"toolChoice,omitempty"`
	MaxSteps         *int              `json:"maxSteps,omitempty"`
	StopWhen         []StopCondition   `json:"stopWhen,omitempty"`
	SendReasoning    *bool             `json:"sendReasoning,omitempty"`
	MaxOutputTokens  *int              `json:"maxOutputTokens,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	TopP             *float64          `json:"topP,omitempty"`
	TopK             *int              `json:"topK,omitempty"`
	PresencePenalty  *float64          `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64          `json:"frequencyPenalty,omitempty"`
	StopSequences    *[]string         `json:"stopSequences,omitempty"`
	Seed             *int64            `json:"seed,omitempty"`
	MaxRetries       *int              `json:"maxRetries,omitempty"`
	Timeout          *TimeoutConfig    `json:"timeout,omitempty"`
	Headers          map[string]string `json:"headers,omitempty"`
	ProviderOptions  map[string]any    `json:"providerOptions,omitempty"`
	Output           *OutputSpec       `json:"output,omitempty"`
	// Telemetry, when set, says what the turn's spans record (nil: no
	// message content).
	Telemetry *TelemetryConfig `json:"telemetry,omitempty"`
	// Refuse, when set, refuses the turn with this reason: the model is
	// never called and the turn ends with a *TurnRefusedError.
	Refuse *string `json:"refuse,omitempty"`
}

// PrepareStepContext is what beforeStep sees before each model step.
type PrepareStepContext struct {
	Identity
	StepNumber  int            `json:"stepNumber"`
	Steps       []StepResult   `json:"steps"`
	Model       string         `json:"model"`
	System      string         `json:"system"`
	Messages    []ModelMessage `json:"messages"`
	ActiveTools []string       `json:"activeTools"`
	// Turn is the turn's context after beforeTurn overrides.
	Turn *TurnContext `json:"turn,omitempty"`
	// State holds the declared state the beforeStep rules read, as read
	// before the step (see TurnContext.State).
	State map[string]any `json:"state,omitempty"`
}

// StepConfig is what beforeStep returns: overrides for this step only.
type StepConfig struct {
	Model           *string         `json:"model,omitempty"`
	ToolChoice      *ToolChoice     `json:"toolChoice,omitempty"`
	ActiveTools     *[]string       `json:"activeTools,omitempty"`
	System          *string         `json:"system,omitempty"`
	Messages        *[]ModelMessage `json:"messages,omitempty"`
	ProviderOptions map[string]any  `json:"providerOptions,omitempty"`
}

// ToolCallRecord is an earlier tool call of the same turn, as rules see it.
type ToolCallRecord struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	StepNumber int             `json:"stepNumber"`
	// Decision is the Decision constant the call resolved to.
	Decision string `json:"decision"`
	Success  bool   `json:"success"`
}

// ToolCallContext is what beforeToolCall sees. It spreads the tool call at
// the top level, as Think does, and adds the turn's identity.
type ToolCallContext struct {
	Identity
	Type       string          `json:"type"` // always "tool-call"
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Dynamic    bool            `json:"dynamic,omitempty"`
	// Tool describes the called tool (kind, server, schema).
	Tool       ToolInfo       `json:"tool"`
	StepNumber int            `json:"stepNumber"`
	Messages   []ModelMessage `json:"messages"`
	Body       map[string]any `json:"body,omitempty"`
	// PreviousCalls are this turn's earlier calls, in call order.
	PreviousCalls []ToolCallRecord `json:"previousCalls"`
	// Attachments are the files of the turn's last user message.
	Attachments []Attachment `json:"attachments,omitempty"`
	// State holds the declared state the rules read for this call
	// (input.state; policy/state.Values), as read before it; nil when
	// they read none.
	State map[string]any `json:"state,omitempty"`
}

// Tool call actions (the reference's ToolCallDecision.action).
const (
	ActionAllow      = "allow"
	ActionBlock      = "block"
	ActionSubstitute = "substitute"
	// ActionApproval holds the call until a person approves it (approval.go).
	ActionApproval = "approval"
)

// ToolCallDecision is what beforeToolCall returns. A nil decision means
// allow with the model's input.
type ToolCallDecision struct {
	Action string `json:"action"`
	// Input is the rewritten input for allow, or the attributed input for
	// substitute (recorded, not executed).
	Input json.RawMessage `json:"input,omitempty"`
	// Reason is what the model sees for block; empty means a default sentence.
	Reason string `json:"reason,omitempty"`
	// Output is what the model sees for substitute.
	Output json.RawMessage `json:"output,omitempty"`
	// Approvals are the reasons an approval decision asks for a person's
	// approval; Input is then the input that would run (after patches).
	Approvals []ApprovalReason `json:"approvals,omitempty"`
}

// Decisions a tool call resolved to, as recorded in afterToolCall and audit.
const (
	DecisionAllow      = "allow"
	DecisionRewrite    = "rewrite"
	DecisionBlock      = "block"
	DecisionSubstitute = "substitute"
	// DecisionError is a beforeToolCall failure, an invalid or inactive
	// tool call: the tool did not run and the model sees an error.
	DecisionError = "error"
	// DecisionClient is a client tool handed to the client.
	DecisionClient = "client"
)

// ToolCallResultContext is what afterToolCall sees once a call's outcome is
// known: for executions, blocks, substitutions and errors alike.
type ToolCallResultContext struct {
	Identity
	Type       string `json:"type"` // always "tool-call"
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// Input is what the model emitted.
	Input json.RawMessage `json:"input"`
	// EffectiveInput is what the tool ran with (rewritten input), or the
	// substitute decision's attributed input.
	EffectiveInput json.RawMessage `json:"effectiveInput,omitempty"`
	Dynamic        bool            `json:"dynamic,omitempty"`
	Tool           ToolInfo        `json:"tool"`
	StepNumber     int             `json:"stepNumber"`
	Messages       []ModelMessage  `json:"messages,omitempty"`
	DurationMs     float64         `json:"durationMs"`
	Success        bool            `json:"success"`
	// Output is the tool's own output when Success. In afterToolCall it
	// stays the original even when the toolResult hook replaced what the
	// model sees (ModelOutput), so audit keeps the original outcome.
	Output json.RawMessage `json:"output,omitempty"`
	// ModelOutput is the output the model saw when the toolResult hook
	// replaced it (redaction); nil when unchanged.
	ModelOutput json.RawMessage `json:"modelOutput,omitempty"`
	Error       string          `json:"error,omitempty"`
	// Decision is one of the Decision constants.
	Decision string `json:"decision"`
	// Executed reports whether the tool's executor ran.
	Executed bool `json:"executed"`
	// State holds the declared state the toolResult rules read, as for
	// ToolCallContext.State.
	State map[string]any `json:"state,omitempty"`
}

// ToolResultDecision is what the optional tool-result hook returns: a
// replacement for the output the model sees. Nil means unchanged.
type ToolResultDecision struct {
	Output json.RawMessage `json:"output"`
}

// Usage is token accounting, as in the AI SDK's LanguageModelUsage.
type Usage struct {
	InputTokens       int `json:"inputTokens"`
	OutputTokens      int `json:"outputTokens"`
	TotalTokens       int `json:"totalTokens"`
	ReasoningTokens   int `json:"reasoningTokens,omitempty"`
	CachedInputTokens int `json:"cachedInputTokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		TotalTokens:       u.TotalTokens + v.TotalTokens,
		ReasoningTokens:   u.ReasoningTokens + v.ReasoningTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
	}
}

// ToolCall is a model's tool call in a step.
type ToolCall struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Dynamic    bool            `json:"dynamic,omitempty"`
}

// ToolResult is a tool call's result as the model saw it.
type ToolResult struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Decision   string          `json:"decision"`
}

// Finish reasons, as in the AI SDK (and valid in the UI message stream).
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content-filter"
	FinishToolCalls     = "tool-calls"
	FinishError         = "error"
	FinishOther         = "other"
	FinishInterrupted   = "interrupted"
)

// StepResult is onStepFinish's context: the record of one model step.
type StepResult struct {
	Identity
	StepNumber       int             `json:"stepNumber"`
	Model            string          `json:"model"`
	Text             string          `json:"text"`
	Reasoning        []string        `json:"reasoning,omitempty"`
	ReasoningText    string          `json:"reasoningText,omitempty"`
	ToolCalls        []ToolCall      `json:"toolCalls"`
	ToolResults      []ToolResult    `json:"toolResults"`
	FinishReason     string          `json:"finishReason"`
	RawFinishReason  string          `json:"rawFinishReason,omitempty"`
	Usage            Usage           `json:"usage"`
	Warnings         []string        `json:"warnings,omitempty"`
	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
}

// ChunkContext is onChunk's context: one model stream part.
type ChunkContext struct {
	Identity
	StepNumber int        `json:"stepNumber"`
	Chunk      StreamPart `json:"chunk"`
}

// Turn statuses (ChatResponseResult.status).
const (
	StatusCompleted = "completed"
	StatusError     = "error"
	StatusAborted   = "aborted"
)

// ChatResponseResult is onChatResponse's context: how a turn ended, after
// its assistant message was built.
type ChatResponseResult struct {
	Identity
	Message      UIMessage `json:"message"`
	Continuation bool      `json:"continuation"`
	Status       string    `json:"status"`
	Error        string    `json:"error,omitempty"`
	// ErrorClass is the class of the error that ended the turn
	// (ClassifyError); empty unless Status is StatusError.
	ErrorClass   string  `json:"errorClass,omitempty"`
	FinishReason string  `json:"finishReason,omitempty"`
	Steps        int     `json:"steps"`
	Usage        Usage   `json:"usage"`
	DurationMs   float64 `json:"durationMs"`
}

// Error stages: where in a turn a failure happened.
const (
	// StageSetup: the turn could not be configured — beforeTurn failed,
	// the merged configuration is invalid, or a model (the turn's, or a
	// beforeStep override) does not resolve.
	StageSetup = "setup"
	// StageStream: the model stream failed (after retries), stalled, the
	// turn timed out, the provider panicked, or the structured output
	// does not match its schema.
	StageStream = "stream"
	// StageTool: a tool failed, panicked, timed out or returned invalid
	// JSON; the model sees a tool error and the turn goes on.
	StageTool = "tool"
	// StagePolicy: a decision hook failed or panicked (beforeStep ends the
	// turn; beforeToolCall and toolResult become tool errors).
	StagePolicy = "policy"
)

// ChatErrorContext is onChatError's context: one path for every failure
// stage (Think misses several, think-implementation.md §2.8).
type ChatErrorContext struct {
	Identity
	Stage string `json:"stage"`
	// Err is the raw error; never shown to clients by default.
	Err error `json:"-"`
	// Message is Err's text, for serialisation.
	Message string `json:"message"`
	// Class is Err's error class (ClassifyError): one of the Class
	// constants.
	Class string `json:"class"`
	// PartialMessage reports whether the turn's assistant message already
	// has parts when the error happens.
	PartialMessage bool `json:"partialMessage"`
	// At is when the error happened.
	At time.Time `json:"at"`
}
