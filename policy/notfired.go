package policy

// MaxNotFired bounds the rules an explanation lists.
const MaxNotFired = 100

// NotFired is a rule that did not fire in an explained dry run, and why.
type NotFired struct {
	// Rule is the rule's id: "file.yaml#name" for a CEL rule,
	// "data.turngate.tool_call.block" for a Rego decision rule.
	Rule string `json:"rule"`
	// Location is where the rule is defined.
	Location Location `json:"location"`
	// When is a CEL rule's when expression and Value what it evaluated
	// to (false, or an error).
	When  string `json:"when,omitempty"`
	Value string `json:"value,omitempty"`
	// Failed is a Rego rule's first body expression that failed, and
	// FailedAt where it is written; absent when the evaluation never
	// reached the rule's body.
	Failed   string    `json:"failed,omitempty"`
	FailedAt *Location `json:"failedAt,omitempty"`
}
