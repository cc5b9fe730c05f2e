package opa

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

const resultPkg = "package turngate.tool_result\n\n"

func result(name, output string) *engine.ToolCallResultContext {
	tc := call(name, `{"q":"x"}`)
	return &engine.ToolCallResultContext{
		Identity:   tc.Identity,
		Type:       "tool-call",
		ToolCallID: tc.ToolCallID,
		ToolName:   name,
		Input:      tc.Input,
		Tool:       tc.Tool,
		Success:    true,
		Output:     json.RawMessage(output),
		Decision:   engine.DecisionAllow,
		Executed:   true,
	}
}

func TestToolResult(t *testing.T) {
	tests := []struct {
		name    string
		modules map[string]string
		rc      *engine.ToolCallResultContext
		want    json.RawMessage // nil: unchanged
		fired   []string
	}{
		{
			name:    "nothing fires: unchanged",
			modules: map[string]string{"a.rego": resultPkg + `redact contains "/ssn" if input.tool.name == "hr"`},
			rc:      result("search", `{"ssn":"1"}`),
		},
		{
			name: "redact paths, nested and in arrays; missing paths skipped",
			modules: map[string]string{"a.rego": resultPkg + `
redact contains "/ssn" if input.tool.name == "hr"
redact contains "/people/1/email" if input.tool.name == "hr"
redact contains "/a~1b" if input.tool.name == "hr"
redact contains "/absent/deeper" if input.tool.name == "hr"
`},
			rc:   result("hr", `{"ssn":"123","people":[{"email":"a@x"},{"email":"b@x"}],"a/b":1}`),
			want: json.RawMessage(`{"a/b":"[REDACTED]","people":[{"email":"a@x"},{"email":"[REDACTED]"}],"ssn":"[REDACTED]"}`),
			fired: []string{
				`data.turngate.tool_result.redact["/absent/deeper"]`,
				`data.turngate.tool_result.redact["/a~1b"]`,
				`data.turngate.tool_result.redact["/people/1/email"]`,
				`data.turngate.tool_result.redact["/ssn"]`,
			},
		},
		{
			name: "redact every matching value found with walk",
			modules: map[string]string{"a.rego": resultPkg + `
redact contains concat("", [sprintf("/%v", [p]) | some p in path]) if {
	walk(input.output, [path, value])
	is_string(value)
	regex.match(` + "`" + `^\d{3}-\d{2}-\d{4}$` + "`" + `, value)
}
`},
			rc:    result("hr", `{"rows":[{"id":"123-45-6789"},{"id":"ok"}],"boss":{"id":"987-65-4321"}}`),
			want:  json.RawMessage(`{"boss":{"id":"[REDACTED]"},"rows":[{"id":"[REDACTED]"},{"id":"ok"}]}`),
			fired: []string{`data.turngate.tool_result.redact["/boss/id"]`, `data.turngate.tool_result.redact["/rows/0/id"]`},
		},
		{
			name: "patch then redact",
			modules: map[string]string{
				"a.rego": resultPkg + `patch contains {"op": "remove", "path": "/debug"} if true`,
				"b.rego": resultPkg + `redact contains "/token" if true`,
			},
			rc:   result("x", `{"debug":{"trace":1},"token":"s3cr3t","ok":true}`),
			want: json.RawMessage(`{"ok":true,"token":"[REDACTED]"}`),
			fired: []string{
				`data.turngate.tool_result.patch[{"op":"remove","path":"/debug"}]`,
				`data.turngate.tool_result.redact["/token"]`,
			},
		},
		{
			name:    "redact the whole output",
			modules: map[string]string{"a.rego": resultPkg + `redact contains "" if not input.success`},
			rc: func() *engine.ToolCallResultContext {
				rc := result("x", `"stack trace with secrets"`)
				rc.Success = false
				return rc
			}(),
			want:  json.RawMessage(`"[REDACTED]"`),
			fired: []string{`data.turngate.tool_result.redact[""]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, testOptions, tt.modules)
			if p.HasToolCall() || !p.HasToolResult() {
				t.Errorf("HasToolCall = %v, HasToolResult = %v; want false, true", p.HasToolCall(), p.HasToolResult())
			}
			d, tr, err := p.ToolResult(context.Background(), tt.rc)
			if err != nil {
				t.Fatalf("ToolResult: %v", err)
			}
			switch {
			case tt.want == nil && d != nil:
				t.Errorf("decision = %s, want unchanged", d.Output)
			case tt.want != nil && (d == nil || !jsonEqual(t, d.Output, tt.want)):
				t.Errorf("decision = %+v, want output %s", d, tt.want)
			}
			if !equalStrings(tr.RulesFired, tt.fired) {
				t.Errorf("RulesFired = %q, want %q", tr.RulesFired, tt.fired)
			}
		})
	}
}

func TestToolResultFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		modules map[string]string
		rc      *engine.ToolCallResultContext
		code    string
	}{
		{"redact member not a string", map[string]string{"a.rego": resultPkg + `redact contains input.output.n if true`}, result("x", `{"n":1}`), policy.CodeValidation},
		{"redact path not a pointer", map[string]string{"a.rego": resultPkg + `redact contains "ssn" if true`}, result("x", `{}`), policy.CodeValidation},
		{"patch failing to apply", map[string]string{"a.rego": resultPkg + `patch contains {"op": "remove", "path": "/a"} if true`}, result("x", `{}`), policy.CodeValidation},
		{"output not JSON", map[string]string{"a.rego": resultPkg + `redact contains "/a" if true`}, result("x", `{"a":`), policy.CodeValidation},
		{"runtime error", map[string]string{"a.rego": resultPkg + `redact contains x if x := sprintf("/%d", [1 / count(input.output)])`}, result("x", `{}`), policy.CodeEval},
		{"no tool_result package", map[string]string{"a.rego": pkg + `block contains "x" if false`}, result("x", `{}`), policy.CodeUndefined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, testOptions, tt.modules)
			d, _, err := p.ToolResult(context.Background(), tt.rc)
			if got := errCode(err); got != tt.code || d != nil {
				t.Fatalf("ToolResult = %+v, %v; want a %s error", d, err, tt.code)
			}
		})
	}
}

func TestToolResultInput(t *testing.T) {
	rc := result("x", `{"n":1}`)
	rc.Success, rc.Error, rc.Decision, rc.DurationMs = false, "boom", engine.DecisionRewrite, 12.5
	rc.EffectiveInput = json.RawMessage(`{"q":"y"}`)
	p := mustCompile(t, testOptions, map[string]string{"a.rego": resultPkg + `
redact contains "/n" if {
	input.output.n == 1
	input.success == false
	input.error == "boom"
	input.decision == "rewrite"
	input.executed
	input.effectiveInput.q == "y"
	input.tool.input.q == "x"
	input.durationMs == 12.5
	input.principal.tenant == "acme"
}`})
	d, _, err := p.ToolResult(context.Background(), rc)
	if err != nil || d == nil || string(d.Output) != `{"n":"[REDACTED]"}` {
		t.Fatalf("ToolResult = %+v, %v; want /n redacted", d, err)
	}
}
