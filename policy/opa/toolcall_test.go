package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// The reference's beforeToolCall examples, as the Rego in testdata/cookbook.
func TestCookbook(t *testing.T) {
	rf := loadDir(t, "testdata/cookbook")
	p, errs := Compile(rf.modules, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	readOnly := call("delete", `{"id":7}`)
	readOnly.Body = map[string]any{"mode": "read-only"}
	readWrite := call("delete", `{"id":7}`)
	readWrite.Body = map[string]any{"mode": "read-write"}

	tests := []struct {
		name string
		tc   *engine.ToolCallContext
		want *engine.ToolCallDecision
	}{
		{"block delete in read-only mode", readOnly,
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "delete is disabled in read-only mode"}},
		{"delete allowed otherwise", readWrite, nil},
		{"substitute cached weather", call("weather", `{"city":"Paris"}`),
			&engine.ToolCallDecision{Action: engine.ActionSubstitute, Output: json.RawMessage(`{"celsius":24,"city":"Paris","forecast":"sunny"}`)}},
		{"uncached weather runs", call("weather", `{"city":"Lima"}`), nil},
		{"clamp search limit", call("search", `{"query":"go","limit":500}`),
			&engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"query":"go","limit":50}`)}},
		{"default search limit", call("search", `{"query":"go"}`),
			&engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"query":"go","limit":10}`)}},
		{"small limit kept", call("search", `{"query":"go","limit":5}`), nil},
		{"log only: no decision", call("lookup", `{}`), nil},
		{"typed input: blank query blocked", call("search", `{"query":" ","limit":5}`),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "search needs a query"}},
		{"undefined under not: missing region blocked", call("transfer", `{"amount":10}`),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "transfer needs an allowed region (eu or us)"}},
		{"sets and arrays: protected targets named", call("deploy", `{"targets":["prod","dev","billing"]}`),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "deploy to billing, prod needs a change ticket"}},
		{"string or number: \"50\" over the cap", bulkEmail("50"),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "bulk_email: at most 10 recipients"}},
		{"string or number: 5 runs", bulkEmail(5), nil},
		{"URL allow-list: userinfo trick blocked", call("fetch", `{"url":"https://api.example.com@evil.com/x"}`),
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "fetch may only reach the allow-listed https hosts"}},
		{"URL allow-list: allowed host runs", call("fetch", `{"url":"https://API.example.com/x"}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := p.ToolCall(context.Background(), tt.tc)
			if err != nil {
				t.Fatalf("ToolCall: %v", err)
			}
			assertDecision(t, got, tt.want)
		})
	}

	results, errs := RunTests(context.Background(), rf.modules, rf.tests, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("RunTests: %v", errs)
	}
	if len(results) != 28 {
		t.Errorf("got %d test results, want 28", len(results))
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s %s (%v): %s", r.Package, r.Name, r.Location, r.Message)
		}
	}
}

// bulkEmail is a bulk_email call whose request body sets maxRecipients.
func bulkEmail(maxRecipients any) *engine.ToolCallContext {
	tc := call("bulk_email", `{}`)
	tc.Body = map[string]any{"maxRecipients": maxRecipients}
	return tc
}

func assertDecision(t *testing.T, got, want *engine.ToolCallDecision) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("decision = %+v, want %+v", got, want)
	}
	if got == nil {
		return
	}
	if got.Action != want.Action || got.Reason != want.Reason ||
		!jsonEqual(t, got.Input, want.Input) || !jsonEqual(t, got.Output, want.Output) {
		t.Errorf("decision = {%s input=%s reason=%q output=%s}, want {%s input=%s reason=%q output=%s}",
			got.Action, got.Input, got.Reason, got.Output, want.Action, want.Input, want.Reason, want.Output)
	}
}

// jsonEqual compares two JSON documents semantically (nil equals nil only).
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("invalid JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

const pkg = "package turngate.tool_call\n\n"

func TestToolCallDecisions(t *testing.T) {
	blockDelete := `block contains "no delete" if input.tool.name == "delete"` + "\n"
	subWeather := `substitute := {"output": {"cached": true}, "input": {"city": "x"}} if input.tool.name == "weather"` + "\n"
	patchLimit := `patch contains {"op": "replace", "path": "/limit", "value": 50} if input.tool.input.limit > 50` + "\n"
	tests := []struct {
		name    string
		modules map[string]string
		tc      *engine.ToolCallContext
		want    *engine.ToolCallDecision
		fired   []string
	}{
		{
			name:    "nothing fires: allow",
			modules: map[string]string{"a.rego": pkg + blockDelete},
			tc:      call("search", `{}`),
		},
		{
			name:    "block",
			modules: map[string]string{"a.rego": pkg + blockDelete},
			tc:      call("delete", `{}`),
			want:    &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no delete"},
			fired:   []string{`data.turngate.tool_call.block["no delete"]`},
		},
		{
			name:    "substitute",
			modules: map[string]string{"a.rego": pkg + subWeather},
			tc:      call("weather", `{"city":"Paris"}`),
			want:    &engine.ToolCallDecision{Action: engine.ActionSubstitute, Output: json.RawMessage(`{"cached":true}`), Input: json.RawMessage(`{"city":"x"}`)},
			fired:   []string{"data.turngate.tool_call.substitute"},
		},
		{
			name:    "patch",
			modules: map[string]string{"a.rego": pkg + patchLimit},
			tc:      call("search", `{"q":"x","limit":99}`),
			want:    &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"q":"x","limit":50}`)},
			fired:   []string{`data.turngate.tool_call.patch[{"op":"replace","path":"/limit","value":50}]`},
		},
		{
			name: "block beats substitute and patch",
			modules: map[string]string{"a.rego": pkg +
				`block contains "b" if true` + "\n" +
				`substitute := {"output": 1} if true` + "\n" +
				`patch contains {"op": "add", "path": "/x", "value": 1} if true` + "\n"},
			tc:   call("any", `{}`),
			want: &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "b"},
			fired: []string{
				`data.turngate.tool_call.block["b"]`,
				"data.turngate.tool_call.substitute",
				`data.turngate.tool_call.patch[{"op":"add","path":"/x","value":1}]`,
			},
		},
		{
			name: "substitute beats patch",
			modules: map[string]string{"a.rego": pkg +
				`substitute := {"output": "cached"} if true` + "\n" +
				`patch contains {"op": "add", "path": "/x", "value": 1} if true` + "\n"},
			tc:   call("any", `{}`),
			want: &engine.ToolCallDecision{Action: engine.ActionSubstitute, Output: json.RawMessage(`"cached"`)},
			fired: []string{
				"data.turngate.tool_call.substitute",
				`data.turngate.tool_call.patch[{"op":"add","path":"/x","value":1}]`,
			},
		},
		{
			name: "two files add block reasons, sorted and joined",
			modules: map[string]string{
				"a.rego": pkg + `block contains "zeta: tenant not allowed" if input.principal.tenant == "acme"`,
				"b.rego": pkg + `block contains "alpha: tool is disabled" if input.tool.name == "delete"`,
			},
			tc:   call("delete", `{}`),
			want: &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "alpha: tool is disabled; zeta: tenant not allowed"},
			fired: []string{
				`data.turngate.tool_call.block["alpha: tool is disabled"]`,
				`data.turngate.tool_call.block["zeta: tenant not allowed"]`,
			},
		},
		{
			name: "patch ops from two files apply in canonical order",
			modules: map[string]string{
				"a.rego": pkg + `patch contains {"value": "b", "path": "/tags/-", "op": "add"} if true`,
				"b.rego": pkg + `patch contains {"op": "add", "path": "/tags/-", "value": "a"} if true` + "\n" +
					`patch contains {"op": "remove", "path": "/secret"} if true`,
			},
			tc:   call("x", `{"tags":[],"secret":1}`),
			want: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"tags":["a","b"]}`)},
			fired: []string{
				`data.turngate.tool_call.patch[{"op":"add","path":"/tags/-","value":"a"}]`,
				`data.turngate.tool_call.patch[{"op":"add","path":"/tags/-","value":"b"}]`,
				`data.turngate.tool_call.patch[{"op":"remove","path":"/secret"}]`,
			},
		},
		{
			name:    "same reason from two rules counted once",
			modules: map[string]string{"a.rego": pkg + `block contains "x" if true`, "b.rego": pkg + `block contains "x" if input.tool.name == "t"`},
			tc:      call("t", `{}`),
			want:    &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "x"},
			fired:   []string{`data.turngate.tool_call.block["x"]`},
		},
		{
			name: "helper rules and identity fields",
			modules: map[string]string{"a.rego": pkg + `
admin if "admin" in input.principal.roles
block contains sprintf("%s/%s may not call %s from %s", [input.principal.tenant, input.principal.subject, input.tool.name, input.entryPath]) if {
	not admin
	input.tool.kind == "http"
	input.agent == "support"
	input.toolCallId == "call-1"
	input.sessionId == "sess-1"
	input.requestId == "req-1"
}`},
			tc:    call("wire", `{}`),
			want:  &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "acme/alice may not call wire from chat"},
			fired: []string{`data.turngate.tool_call.block["acme/alice may not call wire from chat"]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, testOptions, tt.modules)
			got, tr, err := p.ToolCall(context.Background(), tt.tc)
			if err != nil {
				t.Fatalf("ToolCall: %v", err)
			}
			assertDecision(t, got, tt.want)
			if !equalStrings(tr.RulesFired, tt.fired) {
				t.Errorf("RulesFired = %q, want %q", tr.RulesFired, tt.fired)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The patched input does not depend on the order modules are given in.
func TestPatchOrderDeterministic(t *testing.T) {
	mods := map[string]string{
		"a.rego": pkg + `patch contains {"op": "add", "path": "/list/0", "value": "a"} if true`,
		"b.rego": pkg + `patch contains {"op": "add", "path": "/list/0", "value": "b"} if true`,
		"c.rego": pkg + `patch contains {"op": "replace", "path": "/n", "value": 2} if true`,
		"d.rego": pkg + `patch contains {"op": "test", "path": "/n", "value": 2} if true`,
	}
	var first json.RawMessage
	for i := range 10 {
		p := mustCompile(t, testOptions, mods) // map order varies run to run
		d, _, err := p.ToolCall(context.Background(), call("x", `{"list":[],"n":1}`))
		if err != nil {
			t.Fatalf("ToolCall: %v", err)
		}
		if i == 0 {
			first = d.Input
			// add a, add b (both at /list/0), replace n, then test n == 2.
			if !jsonEqual(t, first, json.RawMessage(`{"list":["b","a"],"n":2}`)) {
				t.Fatalf("patched input = %s", first)
			}
			continue
		}
		if string(d.Input) != string(first) {
			t.Fatalf("run %d: patched input %s, first run %s", i, d.Input, first)
		}
	}
}

func TestToolCallFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		modules map[string]string
		opts    Options
		tc      *engine.ToolCallContext
		code    string
		line    int
		msg     string // a substring of the error message, when set
	}{
		{
			name:    "runtime error: division by zero",
			modules: map[string]string{"a.rego": pkg + "block contains \"x\" if {\n\tinput.tool.input.limit / 0 > 1\n}\n"},
			tc:      call("search", `{"limit":3}`),
			code:    policy.CodeEval,
			line:    4,
		},
		{
			name: "conflict: two different substitutes",
			modules: map[string]string{
				"a.rego": pkg + `substitute := {"output": "a"} if true`,
				"b.rego": pkg + `substitute := {"output": "b"} if true`,
			},
			tc:   call("x", `{}`),
			code: policy.CodeConflict,
		},
		{
			name:    "undefined: no tool_call package",
			modules: map[string]string{"a.rego": "package turngate.tool_result\n\nredact contains \"/x\" if true\n"},
			tc:      call("x", `{}`),
			code:    policy.CodeUndefined,
		},
		{
			name: "timeout: an expensive rule",
			modules: map[string]string{"a.rego": pkg + `block contains "never" if {
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i * j < 0
}`},
			opts: Options{Timeout: time.Millisecond},
			tc:   call("x", `{}`),
			code: policy.CodeTimeout,
			msg:  "evaluation exceeded the 1ms deadline",
		},
		{
			// Values whose type only the model's input decides: rules
			// with a literal of the wrong type are load errors
			// (TestDecisionTypeErrors).
			name:    "block member not a string",
			modules: map[string]string{"a.rego": pkg + `block contains input.tool.input.v if true`},
			tc:      call("x", `{"v":42}`),
			code:    policy.CodeValidation,
			line:    3,
		},
		{
			name: "block member not a string, among several block rules",
			modules: map[string]string{
				"a.rego": pkg + `block contains "never" if false`,
				"b.rego": pkg + `block contains input.tool.input.v if true`,
			},
			tc:   call("x", `{"v":42}`),
			code: policy.CodeValidation,
			msg:  "data.turngate.tool_call.block is defined at a.rego:3:1, b.rego:3:1",
		},
		{
			name:    "block is not a set",
			modules: map[string]string{"a.rego": pkg + `block := input.tool.input.v if true`},
			tc:      call("x", `{"v":"no"}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "substitute without output",
			modules: map[string]string{"a.rego": pkg + `substitute := input.tool.input.v if true`},
			tc:      call("x", `{"v":{"input":1}}`),
			code:    policy.CodeValidation,
			line:    3,
		},
		{
			name:    "substitute with a misspelt key",
			modules: map[string]string{"a.rego": pkg + `substitute := input.tool.input.v if true`},
			tc:      call("x", `{"v":{"ouput":1,"output":2}}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "substitute not an object",
			modules: map[string]string{"a.rego": pkg + `substitute := input.tool.input.v if true`},
			tc:      call("x", `{"v":"cached"}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "invalid patch op",
			modules: map[string]string{"a.rego": pkg + `patch contains {"op": "frobnicate", "path": "/x"} if true`},
			tc:      call("x", `{}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "patch op without value",
			modules: map[string]string{"a.rego": pkg + `patch contains {"op": "replace", "path": "/x"} if true`},
			tc:      call("x", `{}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "patch path not a pointer",
			modules: map[string]string{"a.rego": pkg + `patch contains {"op": "remove", "path": "x"} if true`},
			tc:      call("x", `{}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "patch failing to apply",
			modules: map[string]string{"a.rego": pkg + `patch contains {"op": "remove", "path": "/missing"} if true`},
			tc:      call("x", `{"present":1}`),
			code:    policy.CodeValidation,
			line:    3,
		},
		{
			name:    "patch test op failing",
			modules: map[string]string{"a.rego": pkg + `patch contains {"op": "test", "path": "/n", "value": 2} if true`},
			tc:      call("x", `{"n":1}`),
			code:    policy.CodeValidation,
		},
		{
			name:    "model input not JSON",
			modules: map[string]string{"a.rego": pkg + `block contains "x" if false`},
			tc:      call("x", `{"n":`),
			code:    policy.CodeValidation,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, tt.opts, tt.modules)
			d, _, err := p.ToolCall(context.Background(), tt.tc)
			if err == nil {
				t.Fatalf("ToolCall = %+v, want a %s error", d, tt.code)
			}
			if d != nil {
				t.Errorf("ToolCall returned a decision %+v with its error", d)
			}
			if got := errCode(err); got != tt.code {
				t.Fatalf("error code = %q, want %q (%v)", got, tt.code, err)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %q, want it to say %q", err, tt.msg)
			}
			if tt.line != 0 {
				pe := err.(*policy.Error)
				if pe.Location.File != "a.rego" || pe.Location.Line != tt.line {
					t.Errorf("error location = %v, want a.rego:%d", pe.Location, tt.line)
				}
			}
			t.Log(err)
		})
	}
}

func TestCallerContext(t *testing.T) {
	p := mustCompile(t, testOptions, map[string]string{"a.rego": pkg + `block contains "x" if input.tool.name == "x"`})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		code string
	}{
		{"cancelled turn", cancelled, policy.CodeEval},
		{"turn deadline passed", expired, policy.CodeTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, _, err := p.ToolCall(tt.ctx, call("x", `{}`))
			if errCode(err) != tt.code || d != nil {
				t.Fatalf("ToolCall = %+v, %v; want a %s error", d, err, tt.code)
			}
		})
	}
}

// TestDeadlineWithNetwork checks both deadline paths: without network
// builtins a timer cancels the evaluation, with them the evaluation also
// runs under a deadline context (for http.send); either way a runaway rule
// is a CodeTimeout and a quick one decides.
func TestDeadlineWithNetwork(t *testing.T) {
	runaway := pkg + `block contains "never" if {
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i * j < 0
}`
	quick := pkg + `block contains "no x" if input.tool.name == "x"`
	for _, network := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			p := mustCompile(t, Options{Timeout: time.Millisecond, AllowNetwork: network}, map[string]string{"a.rego": runaway})
			if d, _, err := p.ToolCall(context.Background(), call("x", `{}`)); errCode(err) != policy.CodeTimeout {
				t.Fatalf("runaway rule: ToolCall = %+v, %v; want a %s error", d, err, policy.CodeTimeout)
			}
			p = mustCompile(t, Options{Timeout: time.Minute, AllowNetwork: network}, map[string]string{"a.rego": quick})
			d, _, err := p.ToolCall(context.Background(), call("x", `{}`))
			if err != nil || d == nil || d.Action != engine.ActionBlock {
				t.Fatalf("quick rule: ToolCall = %+v, %v; want a block", d, err)
			}
		})
	}
}
