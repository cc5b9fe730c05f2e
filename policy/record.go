package policy

import (
	"encoding/json"
	"strings"
	"time"
)

// Hook names as they appear in decision records.
const (
	HookBeforeTurn     = "beforeTurn"
	HookBeforeStep     = "beforeStep"
	HookBeforeToolCall = "beforeToolCall"
	HookToolResult     = "toolResult"
	// HookBeforePersist is evaluated on every message before the store
	// writes it; what it changes is stored, never shown to the model of
	// the running turn.
	HookBeforePersist = "beforePersist"
	// HookOnChatError is evaluated on every failure of a turn (and every
	// tool error) to choose the text the client, or the model, sees.
	HookOnChatError = "onChatError"
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
	// ErrorClass is, on an onChatError record, the class of the failure
	// (context_overflow, rate_limit, transient, fatal or unknown).
	ErrorClass string `json:"errorClass,omitempty"`
	Outcome    string `json:"outcome"`
	// RulesFired names the rules that matched: "file.yaml#rule" for CEL,
	// "data.turngate.tool_call.block" style paths for Rego.
	RulesFired []string `json:"rulesFired,omitempty"`
	// RulesFiredAt says where each of RulesFired is defined, in its order:
	// "file:line" ("turn.yaml:12", "tools.rego:5"; a Rego rule defined
	// more than once lists each definition, ", "-separated). Replay does
	// not compare it.
	RulesFiredAt []string `json:"rulesFiredAt,omitempty"`
	// SetBy maps each overridden field to the rule that set it last.
	SetBy map[string]string `json:"setBy,omitempty"`
	// Decision is the resulting overrides or tool-call decision.
	Decision any    `json:"decision,omitempty"`
	Error    string `json:"error,omitempty"`
	// Conflicts lists the fields that two or more rules set to different
	// values in this evaluation, and how they were combined.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Shadow is the would-be effect of the revision's shadow rules; it is
	// never enforced. Nil when no shadow rule exists for the hook.
	Shadow *Shadow `json:"shadow,omitempty"`
	// Input is the document the rules evaluated (the hook's input, after
	// the audit log's configured redactions), so a decision can be replayed
	// against another rule set.
	Input json.RawMessage `json:"input,omitempty"`
	// Duration is the evaluation time in microseconds.
	DurationMicros int64 `json:"durationUs"`
}

// Conflict is one field set by several rules to different values in one
// evaluation.
type Conflict struct {
	// Field is the overridden field (maxSteps, model, …).
	Field string `json:"field"`
	// Rules are the rules that set it, in evaluation order.
	Rules []string `json:"rules"`
	// Resolution says how the values combined: "min", "intersection",
	// "none-wins" or "last-wins".
	Resolution string `json:"resolution"`
}

// Shadow is the outcome of a hook's shadow rules on one evaluation: what
// the decision would have been had they been enforced.
type Shadow struct {
	// RulesFired names the shadow rules that fired.
	RulesFired []string `json:"rulesFired,omitempty"`
	// Decision is the would-be decision with the shadow rules enforced.
	Decision any `json:"decision,omitempty"`
	// Effects maps each fired shadow rule to what it would do: the Rego
	// decision rule it adds to (block, substitute, patch, redact). A rule
	// it does not name (a CEL rule) has the effect EffectOverride.
	Effects map[string]string `json:"effects,omitempty"`
	// Changed reports whether Decision differs from the enforced one.
	Changed bool `json:"changed"`
	// Error is set when evaluating the shadow rules failed; the enforced
	// decision is unaffected.
	Error string `json:"error,omitempty"`
}

// EffectOverride is the effect of a CEL shadow rule: it would override
// turn or step settings.
const EffectOverride = "override"

// Effect returns what the fired shadow rule would do: its entry in
// Effects, else EffectOverride.
func (s *Shadow) Effect(rule string) string {
	if e := s.Effects[rule]; e != "" {
		return e
	}
	return EffectOverride
}

// Recorder receives decision records. Implementations must be safe for
// concurrent use and must not block the turn for long: the audit log hands
// the record to its writer, which encodes and chains it later, so neither
// the record nor what it points to (its decision, its input) may change
// after Record.
type Recorder interface {
	Record(r *Record)
}

// InputRecorder is a Recorder that says whether it keeps Record.Input.
// Rendering the evaluated input costs on every decision, so producers fill
// Input for a Recorder that is not an InputRecorder and for one whose
// RecordsInput reports true, and leave it empty otherwise.
type InputRecorder interface {
	Recorder
	RecordsInput() bool
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(r *Record)

// Record calls f.
func (f RecorderFunc) Record(r *Record) { f(r) }

// RuleLocations maps a rule's name (a CEL rule's "file.yaml#rule", a Rego
// decision rule's "data.turngate.tool_call.block") to where it is defined,
// as RulesFiredAt says it. A revision builds it once, when it is loaded.
type RuleLocations map[string]string

// At returns where each of fired is defined, in its order: the location
// of the rule it names (a Rego reference's rule: block["reason"] is
// block's), "" for a rule l does not know; nil for none fired.
func (l RuleLocations) At(fired []string) []string {
	if len(fired) == 0 {
		return nil
	}
	at := make([]string, len(fired))
	for i, f := range fired {
		name, _, _ := strings.Cut(f, "[")
		at[i] = l[name]
	}
	return at
}
