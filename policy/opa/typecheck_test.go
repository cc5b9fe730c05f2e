package opa

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// TestTypeErrors compiles modules of testdata/typed against the input and
// data schemas: every reference to a field or data path that does not
// exist, and every decision rule whose value cannot have its type, is a
// type_error at its position (golden files types_*.golden).
func TestTypeErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		opts  Options
	}{
		{"issue_typos", []string{"tools.rego"}, testOptions},
		{"refs", []string{"more.rego", "results.rego"}, testOptions},
		{"decisions", []string{"decisions.rego", "redact.rego"}, testOptions},
		{"body_schema", []string{"tools.rego"}, Options{BodySchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"mood": map[string]any{"type": "string"}},
		}}},
	}
	all := loadDir(t, "testdata/typed")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mods []policy.File
			for _, f := range all.modules {
				if slices.Contains(tt.files, filepath.Base(f.Path)) {
					mods = append(mods, f)
				}
			}
			p, errs := Compile(mods, all.data, tt.opts)
			if errs == nil {
				t.Fatalf("Compile succeeded (%v), want type errors", p)
			}
			for _, e := range errs {
				if e.Code != policy.CodeType || e.Location.Line == 0 || e.Snippet == "" {
					t.Errorf("error %v: want a positioned %s with a snippet", e, policy.CodeType)
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", "types_"+tt.name+".golden"), golden.Errors(errs))
		})
	}
}

// TestTypedRulesCompile holds rules the type checker must accept: what
// the schemas declare, open values (the model's input, body, output),
// helpers in other packages, authors' own schema annotations, and tests
// that replace input and data with partial documents.
func TestTypedRulesCompile(t *testing.T) {
	data := policy.File{Path: "d.json", Data: []byte(`{"limits": {"search": 50}, "tenants": {"acme": {"tools": ["search"]}}, "catalog": [{"name": "a"}, {"name": "b", "risky": true}]}`)}
	modules := map[string]string{
		"a.rego": pkg + `import data.lib

block contains sprintf("%s is not for %s", [input.tool.name, input.principal.tenant]) if {
	not input.tool.name in data.tenants[input.principal.tenant].tools
}

block contains "risky" if {
	some t in data.catalog
	t.name == input.tool.name
	t.risky
}

block contains "mode" if input.body.mode == input.tool.input.mode

block contains reason if {
	some c in input.previousCalls
	c.toolName == input.tool.name
	c.decision == "block"
	reason := sprintf("%s was blocked at step %d", [c.toolName, c.stepNumber])
}

block contains "admin only" if lib.admin_only[input.tool.name]

patch contains {"op": "replace", "path": "/limit", "value": data.limits.search} if input.tool.input.limit > data.limits.search

substitute := {"output": input.tool.schema, "input": input.tool.input} if input.tool.name == "schema"

# METADATA
# schemas:
#   - input.tool.input: {"type": "object", "properties": {"city": {"type": "string"}}}
substitute := {"output": upper(input.tool.input.city)} if input.tool.name == "weather"
`,
		"lib.rego": "package lib\n\nadmin_only[input.anything] := true if input.flag\n",
		"b.rego": resultPkg + `redact contains p if {
	walk(input.output, [path, _])
	p := concat("", [sprintf("/%v", [x]) | some x in path])
	input.effectiveInput != null
}
`,
	}
	tests := map[string]string{"a_test.rego": `package turngate.tool_call_test

test_partial_input if {
	data.turngate.tool_call.block == {"risky"} with input as {"tool": {"name": "b"}, "principal": {"tenant": "acme"}, "body": {}}
		with data.tenants.acme.tools as ["b"]
		with data.lib.admin_only as {}
}
`}
	p := mustCompile(t, testOptions, modules, data)
	d, _, err := p.ToolCall(context.Background(), call("search", `{"limit": 500}`))
	if err != nil || d == nil || string(d.Input) != `{"limit":50}` {
		t.Errorf("ToolCall = %+v, %v; want the limit clamped", d, err)
	}
	results, errs := RunTests(context.Background(), files(modules), files(tests), []policy.File{data}, testOptions)
	if errs != nil {
		t.Fatalf("RunTests: %v", errs)
	}
	if len(results) != 1 || !results[0].Passed {
		t.Errorf("results = %+v, want one passing test", results)
	}
}

// TestInputSchemasDescribeInputs validates the documents input.go builds
// against the published schemas, so the two cannot drift.
func TestInputSchemasDescribeInputs(t *testing.T) {
	decode := func(b []byte) any {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	full := func(name string) any {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
		if err != nil {
			t.Fatal(err)
		}
		return decode(b)
	}
	roundTrip := func(m map[string]any) any {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return decode(b)
	}
	tests := []struct {
		name string
		pkg  string
		doc  any
	}{
		{"tool_call golden", ToolCallPackage, full("tool_call_input.json")},
		{"tool_result golden", ToolResultPackage, full("tool_result_input.json")},
		{"tool_call minimal", ToolCallPackage, roundTrip(ToolCallInput(call("x", "")))},
		{"tool_result minimal", ToolResultPackage, roundTrip(ToolResultInput(&engine.ToolCallResultContext{}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := InputSchema(tt.pkg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("input.json", s); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("input.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(tt.doc); err != nil {
				t.Errorf("the %s input does not match its schema: %v", tt.pkg, err)
			}
		})
	}
}

// TestBodySchemaAnyOf types input.body by the agents' schemas together: a
// field any of them declares may be read, others are type errors.
func TestBodySchemaAnyOf(t *testing.T) {
	opts := Options{BodySchema: map[string]any{"anyOf": []any{
		map[string]any{"type": "object", "properties": map[string]any{"mode": map[string]any{"type": "string"}}},
		map[string]any{"type": "object", "properties": map[string]any{"tier": map[string]any{"type": "integer"}}},
	}}}
	mustCompile(t, opts, map[string]string{"a.rego": pkg + `block contains "x" if {
	input.body.mode == "read-only"
	input.body.tier > 2
}`})
	_, errs := Compile(files(map[string]string{"a.rego": pkg + `block contains "x" if input.body.tire > 2`}), nil, opts)
	if len(errs) != 1 || errs[0].Code != policy.CodeType || !strings.Contains(errs[0].Message, "did you mean input.body.tier?") {
		t.Errorf("errors = %v, want one type_error suggesting input.body.tier", errs)
	}
}
