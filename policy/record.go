package policy

import "time"

// Hook names as they appear in decision records.
const (
	HookBeforeTurn     = "beforeTurn"
	HookBeforeStep     = "beforeStep"
	HookBeforeToolCall = "beforeToolCall"
	HookToolResult     = "toolResult"
)

// Outcomes of one hook evaluation. "No rule matched" and "not evaluated" are
// distinct: the first ran the rules, the second had none to run.
const (
	OutcomeMatched      = "matched"       // at least one rule fired
	OutcomeNoMatch      = "no_match"      // rules ran, none fired
	OutcomeNotEvaluated = "not_evaluated" // the revision has no rules for this hook
	OutcomeError        = "error"         // evaluation failed; FailurePolicy decided
)

// Record is the audit record of one hook evaluation.
type Record struct {
	Time      time.Time `json:"time"`
	Hook      string    `json:"hook"`
	Revision  string    `json:"revision"`
	RequestID string    `json:"requestId"`
	SessionID string    `json:"sessionId"`
	Agent     string    `json:"agent"`
	Tenant    string    `json:"tenant"`
	// StepNumber and ToolCallID locate the evaluation within the turn.
	StepNumber *int   `json:"stepNumber,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// ToolKind and ToolServer say which kind of tool was called (http,
	// mcp, agent, client, builtin) and, for MCP and sub-agents, which server.
	ToolKind   string `json:"toolKind,omitempty"`
	ToolServer string `json:"toolServer,omitempty"`
	Outcome    string `json:"outcome"`
	// RulesFired names the rules that matched: "file.yaml#rule" for CEL,
	// "data.turngate.tool_call.block" style paths for Rego.
	RulesFired []string `json:"rulesFired,omitempty"`
	// SetBy maps each overridden field to the rule that set it last.
	SetBy map[string]string `json:"setBy,omitempty"`
	// Decision is the resulting overrides or tool-call decision.
	Decision any    `json:"decision,omitempty"`
	Error    string `json:"error,omitempty"`
	// Duration is the evaluation time in microseconds.
	DurationMicros int64 `json:"durationUs"`
}

// Recorder receives decision records. Implementations must be safe for
// concurrent use and must not block the turn for long.
type Recorder interface {
	Record(r *Record)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(r *Record)

// Record calls f.
func (f RecorderFunc) Record(r *Record) { f(r) }
