package opa

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// forced compiles modules with specialisation forced, whatever the
// environment says.
func forced(t *testing.T, modules map[string]string) *Policy {
	t.Helper()
	t.Setenv(SpecialiseEnv, "")
	opts := testOptions
	opts.Specialise = SpecialiseForce
	return mustCompile(t, opts, modules)
}

// TestSpecialisable says which rule sets are specialised: only those where
// a residual cannot decide differently from the generic query.
func TestSpecialisable(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      bool
	}{
		{"lookups and walks", `package turngate.tool_call
t := {"acme": {"max": 3}}[input.principal.tenant]
block contains "long" if { walk(input.tool.input, [p, v]); is_string(v); count(v) > t.max }
block contains "admin" if { input.tool.name == "delete"; not "admin" in input.principal.roles }`, true},
		{"print", `package turngate.tool_call
block contains "x" if { print(input.tool.name); input.tool.input.x }`, false},
		{"with", `package turngate.tool_call
f := input.tool.input.x
block contains "x" if { f with input.tool.input.x as 1 }`, false},
		{"else", `package turngate.tool_call
v := 1 if input.tool.input.x else := 2
block contains "x" if v == 2`, false},
		// The generic query fails on to_number("abc") for every tenant;
		// partial evaluation would drop the body for tenants other than t9.
		{"a failing call before a tenant check", `package turngate.tool_call
block contains "x" if { to_number(input.tool.input.s) > 1; input.principal.tenant == "t9" }`, false},
		{"the tenant check first", `package turngate.tool_call
block contains "x" if { input.principal.tenant == "t9"; to_number(input.tool.input.s) > 1 }`, true},
		{"a ref-headed rule", `package turngate.tool_call
a.b := input.tool.input.x
block contains "x" if a.b`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := forced(t, map[string]string{"p.rego": c.src})
			if got := p.toolCallSpec != nil; got != c.want {
				t.Fatalf("specialised %v, want %v", got, c.want)
			}
		})
	}
}

// TestSpecialisedErrorsAreGeneric: a residual that fails is answered by
// the generic query, so the error and its position are the generic path's.
func TestSpecialisedErrorsAreGeneric(t *testing.T) {
	src := map[string]string{"p.rego": `package turngate.tool_call
block contains "x" if { input.principal.tenant == "acme"; to_number(input.tool.input.s) > 1 }
`}
	p := forced(t, src)
	if p.toolCallSpec == nil {
		t.Fatal("not specialised")
	}
	t.Setenv(SpecialiseEnv, "off")
	g := mustCompile(t, testOptions, src)
	before := Specialised()
	_, _, err := p.ToolCall(context.Background(), call("t", `{"s": "abc"}`))
	_, _, gerr := g.ToolCall(context.Background(), call("t", `{"s": "abc"}`))
	if err == nil || fmt.Sprint(err) != fmt.Sprint(gerr) || !strings.Contains(err.Error(), "p.rego:2") {
		t.Fatalf("specialised %v, generic %v", err, gerr)
	}
	if Specialised().Fallbacks == before.Fallbacks {
		t.Error("the failure was not counted as a fallback")
	}
}

// TestSpecialisedKeepsNondeterministicBuiltins: time.now_ns is evaluated
// per call, not folded into the residual.
func TestSpecialisedKeepsNondeterministicBuiltins(t *testing.T) {
	p := forced(t, map[string]string{"p.rego": `package turngate.tool_call
block contains "night" if { input.principal.tenant == "acme"; time.now_ns() < 0 }
`})
	if p.toolCallSpec.build(context.Background(), specKey{tool: "t", tenant: "acme"}) == nil {
		t.Fatal("no residual")
	}
	if !residualCalls(p, "time.now_ns") {
		t.Fatal("time.now_ns was folded")
	}
}

func residualCalls(p *Policy, name string) bool {
	found := false
	known := ast.NewObject(
		ast.Item(inputKey.tool, ast.ObjectTerm(ast.Item(inputKey.name, ast.StringTerm("t")))),
		ast.Item(inputKey.principal, ast.ObjectTerm(ast.Item(inputKey.tenant, ast.StringTerm("acme")))))
	pq, err := p.toolCallSpec.partial.Partial(context.Background(), rego.EvalParsedInput(known))
	if err != nil {
		return false
	}
	for _, m := range pq.Support {
		found = found || strings.Contains(m.String(), name)
	}
	for _, q := range pq.Queries {
		found = found || strings.Contains(q.String(), name)
	}
	return found
}

// TestSpecialisedUnknownsFromBuilders: every input field but the key's is
// unknown, taken from what the builders set (state and attachments too).
func TestSpecialisedUnknownsFromBuilders(t *testing.T) {
	got := fmt.Sprint(specialisedUnknowns(probeToolCallInput()))
	for _, want := range []string{"input.tool.input", "input.tool.schema", "input.principal.roles", "input.principal.subject",
		"input.previousCalls", "input.body", "input.state", "input.attachments", "input.agent"} {
		if !strings.Contains(got, want) {
			t.Errorf("unknowns %s lack %s", got, want)
		}
	}
	for _, u := range specialisedUnknowns(probeToolCallInput()) {
		if ref := u.Value.(ast.Ref); slices.ContainsFunc(specialisedKnown, ref.HasPrefix) || slices.ContainsFunc(specialisedKnown, func(k ast.Ref) bool { return k.HasPrefix(ref) }) {
			t.Errorf("unknown %v holds a known field", ref)
		}
	}
	res := fmt.Sprint(specialisedUnknowns(probeToolResultInput()))
	for _, want := range []string{"input.output", "input.effectiveInput", "input.error", "input.state"} {
		if !strings.Contains(res, want) {
			t.Errorf("tool_result unknowns %s lack %s", res, want)
		}
	}
}

// TestSpecialisedCacheIsBounded: residuals of more keys than
// MaxSpecialisedKeys evict the least recently used.
func TestSpecialisedCacheIsBounded(t *testing.T) {
	p := forced(t, map[string]string{"p.rego": `package turngate.tool_call
block contains "x" if { input.principal.tenant == "acme"; input.tool.input.x }
`})
	for i := range MaxSpecialisedKeys + 6 {
		if _, _, err := p.ToolCall(context.Background(), call(fmt.Sprintf("tool%d", i), `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	s := p.toolCallSpec
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) != MaxSpecialisedKeys || s.lru.Len() != MaxSpecialisedKeys {
		t.Fatalf("%d cached, want %d", len(s.cache), MaxSpecialisedKeys)
	}
	if _, ok := s.cache[specKey{tool: "tool0", tenant: "acme"}]; ok {
		t.Error("the least recently used key is still cached")
	}
}

// TestSpecialiseEnv: the environment forces or turns off specialisation;
// another value is a compile error naming the variable.
func TestSpecialiseEnv(t *testing.T) {
	src := map[string]string{"p.rego": "package turngate.tool_call\nblock contains \"x\" if input.tool.input.x\n"}
	t.Setenv(SpecialiseEnv, "off")
	if p := mustCompile(t, testOptions, src); p.toolCallSpec != nil {
		t.Error("off: specialised")
	}
	t.Setenv(SpecialiseEnv, "force")
	if p := mustCompile(t, testOptions, src); p.toolCallSpec == nil || !p.toolCallSpec.force {
		t.Error("force: not forced")
	}
	t.Setenv(SpecialiseEnv, "yes")
	_, errs := Compile(files(src), nil, testOptions)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, SpecialiseEnv+`="yes"`) {
		t.Fatalf("errors %v", errs)
	}
}

// TestSpecialisedBench: the benchmark's policy is specialised and its
// residual answers.
func TestSpecialisedBench(t *testing.T) {
	t.Setenv(SpecialiseEnv, "")
	rf := benchPolicies(t)["bench"]
	opts := testOptions
	opts.Specialise = SpecialiseForce
	p, errs := Compile(rf.modules, rf.data, opts)
	if errs != nil {
		t.Fatal(errs)
	}
	before := Specialised().Hits
	for _, c := range benchCases {
		if _, _, err := p.ToolCall(context.Background(), benchCall(t, c.extra)); err != nil {
			t.Fatal(err)
		}
	}
	if got := Specialised().Hits - before; got < uint64(len(benchCases)) {
		t.Fatalf("%d hits, want %d", got, len(benchCases))
	}
}

// TestSpecialisedWalkNamesCannotCollide: the names the shared string walk
// introduces into a residual rule never capture a rule's own variable, so
// a rule that names its variable like them decides as the generic query.
func TestSpecialisedWalkNamesCannotCollide(t *testing.T) {
	src := map[string]string{"p.rego": `package turngate.tool_call
block contains "long" if { input.principal.tenant == "acme"; __turngate_w = input.tool.input.k; walk(input.tool.input, [p, v]); is_string(v); count(v) > 3; __turngate_w == 1 }
`}
	p := forced(t, src)
	if p.toolCallSpec == nil {
		t.Fatal("not specialised")
	}
	t.Setenv(SpecialiseEnv, "off")
	g := mustCompile(t, testOptions, src)
	for _, in := range []string{`{"k": 1, "s": "abcdef"}`, `{"k": 1, "s": "ab"}`, `{"k": 2, "s": "abcdef"}`} {
		got, _, err := p.ToolCall(context.Background(), call("t", in))
		want, _, gerr := g.ToolCall(context.Background(), call("t", in))
		if err != nil || gerr != nil {
			t.Fatalf("%s: specialised %v, generic %v", in, err, gerr)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("%s: specialised %+v, generic %+v", in, got, want)
		}
	}
}

// TestShareWalksFreshNames: a residual rule that already uses the name the
// rewrite would introduce keeps its variable; the rewrite takes another.
func TestShareWalksFreshNames(t *testing.T) {
	m := ast.MustParseModuleWithOpts(`package r
block contains "long" if { walk(input.tool.input, [p, v]); is_string(v); count(v) > 3; __turngate_w0 = input.k; __turngate_w0 == 1 }`,
		ast.ParserOptions{RegoVersion: ast.RegoV1})
	if shareWalks([]*ast.Module{m}) == nil {
		t.Fatal("the walk was not shared")
	}
	body := m.Rules[0].Body.String()
	if !strings.Contains(body, "__turngate_w0_0 = data.__turngate_shared") || !strings.Contains(body, "__turngate_w0 = input.k") {
		t.Fatalf("rewritten body %s", body)
	}
}
