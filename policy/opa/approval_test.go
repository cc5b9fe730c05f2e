package opa

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// approvalRules exercise the approval decision and its precedence.
const approvalRules = `package turngate.tool_call

approval contains "deletes a file" if input.tool.name == "delete"

approval contains {"reason": "moves money", "approvers": ["role:finance", "role:admin"]} if {
	input.tool.name == "transfer"
}

approval contains "large transfer" if {
	input.tool.name == "transfer"
	input.tool.input.amount > 1000
}

patch contains {"op": "add", "path": "/currency", "value": "EUR"} if input.tool.name == "transfer"

block contains "no deletes of /etc" if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc")
}

substitute := {"output": "dry run"} if input.body.dryRun == true
`

func TestApprovalDecision(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"approval.rego": approvalRules})
	dry := call("transfer", `{"amount":5}`)
	dry.Body = map[string]any{"dryRun": true}
	tests := []struct {
		name  string
		tc    *engine.ToolCallContext
		want  *engine.ToolCallDecision
		fired []string
	}{
		{"chat-user approval", call("delete", `{"path":"/tmp/x"}`),
			&engine.ToolCallDecision{Action: engine.ActionApproval, Approvals: []engine.ApprovalReason{{Reason: "deletes a file"}}},
			[]string{`data.turngate.tool_call.approval["deletes a file"]`}},
		{"block wins over approval", call("delete", `{"path":"/etc/passwd"}`),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no deletes of /etc"}, nil},
		{"substitute wins over approval", dry,
			&engine.ToolCallDecision{Action: engine.ActionSubstitute, Output: json.RawMessage(`"dry run"`)}, nil},
		{"role approval asks about the patched input", call("transfer", `{"amount":5000}`),
			&engine.ToolCallDecision{Action: engine.ActionApproval, Input: json.RawMessage(`{"amount":5000,"currency":"EUR"}`),
				Approvals: []engine.ApprovalReason{{Reason: "large transfer"}, {Reason: "moves money", Approvers: []string{"role:admin", "role:finance"}}}},
			[]string{`data.turngate.tool_call.approval["large transfer"]`,
				`data.turngate.tool_call.approval[{"approvers":["role:finance","role:admin"],"reason":"moves money"}]`,
				`data.turngate.tool_call.patch[{"op":"add","path":"/currency","value":"EUR"}]`}},
		{"no approval", call("search", `{}`), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tr, err := p.ToolCall(context.Background(), tt.tc)
			if err != nil {
				t.Fatalf("ToolCall: %v", err)
			}
			assertDecision(t, got, tt.want)
			if got != nil && !reflect.DeepEqual(got.Approvals, tt.want.Approvals) {
				t.Errorf("approvals = %+v, want %+v", got.Approvals, tt.want.Approvals)
			}
			if tt.fired != nil && !reflect.DeepEqual(tr.RulesFired, tt.fired) {
				t.Errorf("fired = %q, want %q", tr.RulesFired, tt.fired)
			}
		})
	}
}

// A malformed approval member (one the type checker cannot see: it comes
// from the input) fails closed naming the rule.
func TestApprovalValidation(t *testing.T) {
	tests := []struct{ name, member, want string }{
		{"number", `7`, "is number, want a string or an object"},
		{"empty reason", `""`, "empty reason"},
		{"unknown key", `{"reason": "x", "who": ["role:a"]}`, `unknown key "who"`},
		{"no approvers", `{"reason": "x"}`, "has no approvers"},
		{"empty approvers", `{"reason": "x", "approvers": []}`, "approvers is empty"},
		{"approver not a role", `{"reason": "x", "approvers": ["alice"]}`, `approver "alice" is not "role:NAME"`},
		{"bare role prefix", `{"reason": "x", "approvers": ["role:"]}`, `is not "role:NAME"`},
		{"no reason", `{"approvers": ["role:a"]}`, "has no reason"},
		{"approvers not a list", `{"reason": "x", "approvers": "role:a"}`, "approvers is string"},
	}
	src := "package turngate.tool_call\n\napproval contains input.body.v if input.tool.name == \"x\"\n"
	p, errs := Compile(files(map[string]string{"a.rego": src}), nil, Options{})
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := call("x", `{}`)
			var v any
			if err := json.Unmarshal([]byte(tt.member), &v); err != nil {
				t.Fatal(err)
			}
			tc.Body = map[string]any{"v": v}
			_, _, err := p.ToolCall(context.Background(), tc)
			var pe *policy.Error
			if !errors.As(err, &pe) || pe.Code != policy.CodeValidation || !strings.Contains(pe.Message, tt.want) || !strings.Contains(pe.Rule, "approval") {
				t.Fatalf("err = %v, want a validation error of the approval rule containing %q", err, tt.want)
			}
		})
	}
}

// A typo'd approval value is a type error at load, as for the other
// decisions.
func TestApprovalTypeErrors(t *testing.T) {
	for _, src := range []string{
		"approval contains 42 if input.tool.name == \"x\"",
		"approval := \"needs a person\" if input.tool.name == \"x\"",
		"approval contains {\"reason\": \"x\", \"approverz\": [\"role:a\"]} if input.tool.name == \"x\"",
	} {
		_, errs := Compile(files(map[string]string{"a.rego": "package turngate.tool_call\n\n" + src + "\n"}), nil, testOptions)
		if len(errs) == 0 || errs[0].Code != policy.CodeType || !strings.Contains(errs[0].Message, "approval must be a set of reasons") {
			t.Errorf("%s: errs = %v, want a type error naming the approval rule", src, errs)
		}
	}
	// Both member forms type-check.
	mustCompile(t, testOptions, map[string]string{"approval.rego": approvalRules})
}

// TestApprovalRequester: "requester" is the one approver that is not a
// role; it lets the principal whose turn asked decide too.
func TestApprovalRequester(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"approval.rego": `package turngate.tool_call

approval contains {"reason": "shares a file", "approvers": ["requester", "role:ops"]} if input.tool.name == "share"
`})
	got, _, err := p.ToolCall(context.Background(), call("share", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.ApprovalReason{{Reason: "shares a file", Approvers: []string{"requester", "role:ops"}}}
	if got == nil || !reflect.DeepEqual(got.Approvals, want) {
		t.Errorf("decision %+v, want approvals %+v", got, want)
	}
}
