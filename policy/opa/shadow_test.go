package opa

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// shadowOutcome is what one evaluation reports, enforced and shadow, as
// the golden file holds it.
type shadowOutcome struct {
	Name       string         `json:"name"`
	Decision   any            `json:"decision"`
	RulesFired []string       `json:"rulesFired"`
	Shadow     *policy.Shadow `json:"shadow"`
}

// TestShadowRules evaluates shadow rules beside enforced ones: their
// would-be effect is in the trace, never in the decision.
func TestShadowRules(t *testing.T) {
	rf := loadDir(t, "testdata/shadow")
	p, errs := Compile(rf.modules, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	readOnly := func(tc *engine.ToolCallContext) *engine.ToolCallContext {
		tc.Body = map[string]any{"mode": "read-only"}
		return tc
	}
	calls := []struct {
		name string
		tc   *engine.ToolCallContext
	}{
		{"no shadow rule fires", call("delete", `{"path":"/tmp/x"}`)},
		{"shadow block would block an allowed delete", call("delete", `{"path":"/etc/passwd"}`)},
		{"shadow block beside an enforced block", readOnly(call("delete", `{"path":"/etc/passwd"}`))},
		{"shadow patch", call("search", `{"query":"go","limit":500}`)},
		{"shadow substitute", call("weather", `{"city":"Paris"}`)},
		{"shadow approval", call("transfer", `{"amount":5}`)},
		{"failing shadow rule leaves the enforced decision", call("divide", `{"by":0}`)},
	}
	var got []shadowOutcome
	for _, c := range calls {
		d, tr, err := p.ToolCall(context.Background(), c.tc)
		if err != nil {
			t.Fatalf("%s: ToolCall: %v", c.name, err)
		}
		got = append(got, outcome(c.name, d, tr))
	}
	results := []struct {
		name string
		rc   *engine.ToolCallResultContext
	}{
		{"shadow redaction", result("lookup", `{"token":"t","email":"a@b.c"}`)},
		{"no shadow redaction", result("lookup", `{"token":"t"}`)},
	}
	for _, r := range results {
		d, tr, err := p.ToolResult(context.Background(), r.rc)
		if err != nil {
			t.Fatalf("%s: ToolResult: %v", r.name, err)
		}
		got = append(got, outcome(r.name, d, tr))
	}
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "shadow.golden"), string(data)+"\n")
}

// outcome renders a decision and its trace; a nil decision is JSON null.
func outcome[D any](name string, d *D, tr Trace) shadowOutcome {
	o := shadowOutcome{Name: name, RulesFired: tr.RulesFired, Shadow: tr.Shadow}
	if d != nil {
		o.Decision = d
	}
	return o
}

// TestNoShadowRules: a policy without shadow rules reports no shadow
// outcome.
func TestNoShadowRules(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"p.rego": pkg + `block contains "no" if input.tool.name == "delete"`})
	_, tr, err := p.ToolCall(context.Background(), call("delete", `{}`))
	if err != nil || tr.Shadow != nil || len(tr.RulesFired) != 1 {
		t.Fatalf("ToolCall: trace %+v, %v; want one rule fired and no shadow outcome", tr, err)
	}
}

// TestShadowErrors: misplaced or malformed shadow annotations are load
// errors at their positions.
func TestShadowErrors(t *testing.T) {
	meta := func(custom string) string { return "# METADATA\n# custom:\n#   shadow: " + custom + "\n" }
	modules := map[string]string{
		"not_bool.rego": pkg + meta(`"yes"`) + `block contains "x" if input.tool.name == "x"` + "\n",
		"helper.rego":   pkg + meta("true") + "is_delete if input.tool.name == \"delete\"\n",
		"other.rego":    "package turngate.helpers\n\n" + meta("true") + "block contains \"x\" if true\n",
		"document.rego": pkg + "# METADATA\n# scope: document\n# custom:\n#   shadow: true\n" + `block contains "d" if input.tool.name == "d"` + "\n",
		"default.rego":  "package turngate.tool_result\n\n" + meta("true") + "default redact := set()\n",
		"dup.rego": pkg + "# METADATA\n# title: same\n# custom:\n#   shadow: true\n" + `patch contains {"op": "remove", "path": "/a"} if input.tool.name == "a"` +
			"\n\n# METADATA\n# title: same\n# custom:\n#   shadow: true\n" + `patch contains {"op": "remove", "path": "/b"} if input.tool.name == "b"` + "\n",
		"reserved.rego": pkg + "__turngate_shadow_0 contains 1 if true\n",
	}
	_, errs := Compile(files(modules), nil, testOptions)
	if errs == nil {
		t.Fatal("Compile succeeded, want errors")
	}
	golden.Check(t, filepath.Join("testdata", "golden", "shadow_errors.golden"), golden.Errors(errs))

	// A shadow rule that does not compile, or whose value has the wrong
	// type, is reported like any rule.
	for _, tt := range []struct {
		rule, want string
	}{
		{`block contains x if input.tool.name == "y"`, "shadow.rego:6:16: compile_error: var x is unsafe"},
		{`block contains 42 if input.tool.name == "y"`, "shadow.rego:6:1: type_error: rule \"data.turngate.tool_call.block\": block must be a set of strings"},
		{`block contains "x" if input.tool.nmae == "y"`, `shadow.rego:6:34: type_error: undefined ref input.tool.nmae: input.tool has no key "nmae"; did you mean input.tool.name?`},
	} {
		_, errs = Compile(files(map[string]string{"shadow.rego": pkg + meta("true") + tt.rule + "\n"}), nil, testOptions)
		if errs == nil || !strings.Contains(errs.Error(), tt.want) {
			t.Errorf("Compile(%s): %v; want %q", tt.rule, errs, tt.want)
		}
	}
}

// TestShadowRulesInTests: Rego tests see shadow rules as enforced, so the
// tests of a rule being rolled out pass before and after its promotion.
func TestShadowRulesInTests(t *testing.T) {
	rf := loadDir(t, "testdata/shadow")
	test := policy.File{Path: "shadow_test.rego", Data: []byte(`package turngate.tool_call_test

import rego.v1

test_etc_deletes_blocked if {
	data.turngate.tool_call.block["deleting /etc/passwd is not allowed"] with input as {"tool": {"name": "delete", "input": {"path": "/etc/passwd"}}}
}
`)}
	results, errs := RunTests(context.Background(), rf.modules, []policy.File{test}, nil, testOptions)
	if errs != nil || len(results) != 1 || !results[0].Passed {
		t.Fatalf("RunTests = %+v, %v; want the shadow rule's test to pass", results, errs)
	}
}
