package opa_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
)

func Example() {
	rules := []policy.File{{Path: "rules/tools.rego", Data: []byte(`package turngate.tool_call

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}

patch contains {"op": "replace", "path": "/limit", "value": 50} if {
	input.tool.name == "search"
	input.tool.input.limit > 50
}
`)}}
	p, errs := opa.Compile(rules, nil, opa.Options{})
	if errs != nil {
		fmt.Println(errs)
		return
	}
	for _, tc := range []*engine.ToolCallContext{
		{ToolName: "delete", Input: json.RawMessage(`{"id":7}`), Body: map[string]any{"mode": "read-only"}},
		{ToolName: "search", Input: json.RawMessage(`{"query":"go","limit":500}`)},
		{ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`)},
	} {
		d, tr, err := p.ToolCall(context.Background(), tc)
		switch {
		case err != nil:
			fmt.Println(tc.ToolName, "error:", err)
		case d == nil:
			fmt.Println(tc.ToolName, "allow")
		default:
			fmt.Println(tc.ToolName, d.Action, d.Reason, string(d.Input), tr.RulesFired)
		}
	}
	// Output:
	// delete block delete is disabled in read-only mode  [data.turngate.tool_call.block["delete is disabled in read-only mode"]]
	// search allow  {"query":"go","limit":50} [data.turngate.tool_call.patch[{"op":"replace","path":"/limit","value":50}]]
	// weather allow
}

func ExampleCompile_sandbox() {
	rules := []policy.File{{Path: "rules/net.rego", Data: []byte(`package turngate.tool_call

block contains "denied upstream" if {
	http.send({"method": "GET", "url": "https://example.com"}).status_code != 200
}
`)}}
	_, errs := opa.Compile(rules, nil, opa.Options{})
	fmt.Println(errs)
	// Output:
	// rules/net.rego:4:2: sandbox_error: http.send is not allowed: network builtins are disabled in the policy sandbox
	// 	http.send({"method": "GET", "url": "https://example.com"}).status_code != 200
	// 	^
}
