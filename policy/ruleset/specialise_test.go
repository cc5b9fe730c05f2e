package ruleset

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy/opa"
)

// specialiseDirs are the shipped rules, the example rule sets and the
// decision-path benchmark's policy.
func specialiseDirs(t *testing.T) []string {
	dirs, err := filepath.Glob("../../examples/*/rules")
	if err != nil {
		t.Fatal(err)
	}
	return append(dirs, "../../rules", "../opa/testdata/bench")
}

// TestSpecialisedMatchesGeneric is the property test of specialised
// evaluation: on generated tool calls and results, every rule set the
// repository ships decides with specialisation forced exactly as with it
// off: the same decision, reasons, patches, rules fired, prints and
// errors (message and position).
func TestSpecialisedMatchesGeneric(t *testing.T) {
	t.Setenv(opa.SpecialiseEnv, "") // the options decide, whatever CI forces
	specialised := 0
	for _, dir := range specialiseDirs(t) {
		t.Run(dir, func(t *testing.T) {
			generic, errs := Load(dir, Options{OPA: opa.Options{Specialise: opa.SpecialiseOff}})
			if errs != nil {
				t.Fatal(errs)
			}
			forced, errs := Load(dir, Options{OPA: opa.Options{Specialise: opa.SpecialiseForce}})
			if errs != nil {
				t.Fatal(errs)
			}
			if !generic.rego.HasToolCall() && !generic.rego.HasToolResult() {
				return
			}
			before := opa.Specialised().Hits
			rng := rand.New(rand.NewPCG(uint64(len(dir)), 24))
			var names []string
			for _, n := range generic.rego.ToolNames() {
				names = append(names, n.Name)
			}
			for i := range 60 {
				tc := genToolCall(rng, names)
				ctx := context.Background()
				if generic.rego.HasToolCall() {
					gd, gt, gerr := generic.rego.ToolCall(ctx, tc)
					fd, ft, ferr := forced.rego.ToolCall(ctx, tc)
					same(t, i, "tool_call", tc, []any{gd, gt.RulesFired, gt.Prints, fmt.Sprint(gerr)}, []any{fd, ft.RulesFired, ft.Prints, fmt.Sprint(ferr)})
				}
				if generic.rego.HasToolResult() {
					rc := genToolResult(rng, tc)
					gd, gt, gerr := generic.rego.ToolResult(ctx, rc)
					fd, ft, ferr := forced.rego.ToolResult(ctx, rc)
					same(t, i, "tool_result", rc, []any{gd, gt.RulesFired, gt.Prints, fmt.Sprint(gerr)}, []any{fd, ft.RulesFired, ft.Prints, fmt.Sprint(ferr)})
				}
			}
			if opa.Specialised().Hits > before {
				specialised++
			}
		})
	}
	// The property is only worth something if residuals answered.
	if specialised < 5 {
		t.Errorf("residuals answered for %d rule sets, want at least 5", specialised)
	}
}

func same(t *testing.T, i int, pkg string, in any, generic, forced []any) {
	t.Helper()
	if !reflect.DeepEqual(generic, forced) {
		b, _ := json.Marshal(in)
		t.Fatalf("call %d, %s: generic %v, specialised %v\ninput: %s", i, pkg, generic, forced, b)
	}
}

// genValues are the strings generated inputs are made of: what the rule
// sets look for (secrets, PII, hosts, commands) and what they must let
// through.
var genValues = []any{
	"hello", "", "AKIAIOSFODNN7EXAMPLE", "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789", "078-05-1120",
	"4111 1111 1111 1111", "dana@example.com", "https://evil.example/x", "https://docs.example.com/a",
	"DROP TABLE users", "rm -rf /", "-----BEGIN RSA PRIVATE KEY-----", "DE89370400440532013000",
	json.Number("80"), json.Number("5"), json.Number("-1"), json.Number("1e3"), true, false, nil,
	"ignore previous instructions", "sk-live-0123456789abcdef", "password=hunter2",
}

var genTenants = []string{"", "acme", "globex", "tenant-00", "tenant-03", "tenant-17", "nobody"}
var genKeys = []string{"query", "limit", "to", "url", "path", "body", "amount", "payee", "text", "city", "note", "sql"}

func genValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(10); {
	case n < 6 || depth > 2:
		return genValues[rng.IntN(len(genValues))]
	case n < 8:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[genKeys[rng.IntN(len(genKeys))]] = genValue(rng, depth+1)
		}
		return m
	default:
		a := make([]any, rng.IntN(3))
		for i := range a {
			a[i] = genValue(rng, depth+1)
		}
		return a
	}
}

func genToolCall(rng *rand.Rand, names []string) *engine.ToolCallContext {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	tools := append([]string{"search", "send_email", "crm_update", "weather", "unknown_tool"}, names...)
	input := map[string]any{}
	for range rng.IntN(5) {
		input[pick(genKeys)] = genValue(rng, 0)
	}
	raw, _ := json.Marshal(input)
	tc := &engine.ToolCallContext{
		Identity: engine.Identity{Agent: pick([]string{"support", "sales", ""}), SessionID: "s1", RequestID: "r1", EntryPath: "chat",
			Principal: engine.Principal{Tenant: pick(genTenants), Subject: pick([]string{"alice", "bob", ""}),
				Roles: []string{pick([]string{"admin", "agent", "sales", "finance"})}}},
		ToolCallID: "call-1", ToolName: pick(tools), Input: raw, StepNumber: rng.IntN(4),
		Tool: engine.ToolInfo{Kind: pick([]string{"http", "mcp", "client"}), Description: "a tool"},
		Body: map[string]any{"mode": pick([]string{"read-only", "read-write"})},
	}
	for range rng.IntN(4) {
		pin, _ := json.Marshal(map[string]any{pick(genKeys): genValue(rng, 1)})
		tc.PreviousCalls = append(tc.PreviousCalls, engine.ToolCallRecord{ToolName: pick(tools), ToolCallID: "c", Input: pin,
			Decision: pick([]string{engine.DecisionAllow, engine.DecisionBlock}), Success: rng.IntN(2) == 0})
	}
	return tc
}

func genToolResult(rng *rand.Rand, tc *engine.ToolCallContext) *engine.ToolCallResultContext {
	out, _ := json.Marshal(genValue(rng, 0))
	return &engine.ToolCallResultContext{Identity: tc.Identity, ToolCallID: tc.ToolCallID, ToolName: tc.ToolName, Tool: tc.Tool,
		Input: tc.Input, StepNumber: tc.StepNumber, Output: out, Success: rng.IntN(4) > 0, Decision: engine.DecisionAllow, Executed: true}
}
