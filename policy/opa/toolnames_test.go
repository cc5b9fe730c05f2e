package opa

import (
	"slices"
	"testing"
)

// The tool names `turngate check --config` checks are found however a
// rule spells the comparison: directly, through a variable bound to the
// tool, its name or an earlier call, and through a literal set rule.
func TestToolNames(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"compared", `block contains "x" if input.tool.name == "a"`, []string{"a"}},
		{"reversed and unified", `block contains "x" if { "a" == input.tool.name; input.tool.name = "b" }`, []string{"a", "b"}},
		{"in a literal set", `block contains "x" if input.tool.name in {"a", "b"}`, []string{"a", "b"}},
		{"an earlier call", `block contains "x" if input.previousCalls[_].toolName != "a"`, []string{"a"}},
		{"some c in previousCalls", `block contains "x" if { some c in input.previousCalls; c.toolName == "a" }`, []string{"a"}},
		{"some i, c in previousCalls", `block contains "x" if { some i, c in input.previousCalls; i > 0; c.toolName == "a" }`, []string{"a"}},
		{"every c in previousCalls", `block contains "x" if { every c in input.previousCalls { c.toolName != "a" } }`, []string{"a"}},
		{"a call bound by :=", `block contains "x" if { c := input.previousCalls[_]; c.toolName == "a" }`, []string{"a"}},
		{"the tool bound", `block contains "x" if { t := input.tool; t.name == "a" }`, []string{"a"}},
		{"the name bound, twice", `block contains "x" if { t := input.tool; n := t.name; n == "a" }`, []string{"a"}},
		{"a set rule", "names := {\"a\", \"b\"}\n\nblock contains \"x\" if input.tool.name in names", []string{"a", "b"}},
		{"a contains rule", "names contains \"a\"\n\nnames contains \"b\"\n\nblock contains \"x\" if input.tool.name in names", []string{"a", "b"}},
		{"not a tool name", `block contains "x" if { some c in input.previousCalls; c.decision == "a"; input.body.name == "b" }`, nil},
		{"a comprehension's own variable", `block contains "x" if { n := [c | some c in input.previousCalls]; count(n) > 1; input.tool.name == "a" }`, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, testOptions, map[string]string{"tools.rego": "package turngate.tool_call\n\n" + tc.body + "\n"})
			var got []string
			for _, n := range p.ToolNames() {
				got = append(got, n.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ToolNames = %q, want %q", got, tc.want)
			}
		})
	}
}
