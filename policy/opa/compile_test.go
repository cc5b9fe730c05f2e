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

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		opts  Options
		codes []string
	}{
		{"sandbox", []string{"sandbox.rego"}, testOptions, []string{policy.CodeSandbox, policy.CodeSandbox, policy.CodeSandbox}},
		{"sandbox_allow_network", []string{"sandbox.rego"}, Options{AllowNetwork: true}, []string{policy.CodeSandbox}},
		{"parse", []string{"parse.rego", "parse2.rego"}, testOptions, nil},
		{"compile", []string{"compile.rego"}, testOptions, nil},
		{"names", []string{"names.rego", "names_result.rego", "names_lib.rego", "names_deep.rego", "names_unused.rego", "names_other.rego"}, testOptions,
			[]string{policy.CodeSchema, policy.CodeSchema, policy.CodeSchema, policy.CodeSchema, policy.CodeSchema, policy.CodeSchema, policy.CodeSchema}},
		// A misspelt or missing "turngate." must not switch the check off;
		// other packages of the user's own, used or not, are left alone.
		{"names_outside", []string{"names_root.rego", "names_bare.rego", "names_guards.rego", "names_lists.rego", "names_uses_lists.rego", "names_other.rego"}, testOptions,
			[]string{policy.CodeSchema, policy.CodeSchema, policy.CodeSchema}},
		// OPA's deny, allow, warn and violation, read by no rule.
		{"names_opa", []string{"names_opa.rego", "names_opa_read.rego"}, testOptions,
			[]string{policy.CodeSchema, policy.CodeSchema, policy.CodeSchema, policy.CodeSchema}},
		// A reference under data.turngate into no package: a misspelt import.
		{"names_import", []string{"names_import.rego", "names_import_lib.rego"}, testOptions, []string{policy.CodeType}},
		{"all_at_once", []string{"sandbox.rego", "parse2.rego", "compile.rego"}, testOptions,
			[]string{policy.CodeParse, policy.CodeSandbox, policy.CodeSandbox, policy.CodeSandbox}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := loadDir(t, "testdata/errors").modules
			var mods []policy.File
			for _, f := range all {
				for _, want := range tt.files {
					if strings.HasSuffix(f.Path, "/"+want) {
						mods = append(mods, f)
					}
				}
			}
			p, errs := Compile(mods, nil, tt.opts)
			if errs == nil {
				t.Fatalf("Compile succeeded (%v), want errors", p)
			}
			if tt.codes != nil {
				var got []string
				for _, e := range errs {
					got = append(got, e.Code)
				}
				if !equalStrings(got, tt.codes) {
					t.Errorf("codes = %q, want %q", got, tt.codes)
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", "errors_"+tt.name+".golden"), golden.Errors(errs))
		})
	}
}

func TestDataDocuments(t *testing.T) {
	rf := loadDir(t, "testdata/tenants")
	p, errs := Compile(rf.modules, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	tests := []struct {
		name   string
		tenant string
		tool   string
		input  string
		want   *engine.ToolCallDecision
	}{
		{"allowed tool", "acme", "weather", `{"city":"Oslo"}`, nil},
		{"tool not on the tenant's list", "globex", "weather", `{}`,
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: `tenant "globex" may not call "weather"`}},
		{"unknown tenant", "initech", "search", `{}`,
			&engine.ToolCallDecision{Action: engine.ActionBlock, Reason: `tenant "initech" may not call "search"`}},
		{"limit from YAML data", "acme", "search", `{"limit":100}`,
			&engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"limit":25}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := call(tt.tool, tt.input)
			tc.Principal.Tenant = tt.tenant
			got, _, err := p.ToolCall(context.Background(), tc)
			if err != nil {
				t.Fatalf("ToolCall: %v", err)
			}
			assertDecision(t, got, tt.want)
		})
	}
}

func TestDataErrors(t *testing.T) {
	rule := policy.File{Path: "a.rego", Data: []byte(pkg + `block contains "x" if data.flag`)}
	tests := []struct {
		name    string
		modules []policy.File
		data    []policy.File
		want    string // the rendered errors
	}{
		{
			name: "same key in two files",
			data: []policy.File{
				{Path: "a.json", Data: []byte(`{"tenants": {"acme": {"tools": ["x"]}}}`)},
				{Path: "b.data.yaml", Data: []byte("tenants:\n  acme:\n    tools: [y]\n  globex: {}\n")},
			},
			want: `b.data.yaml: conflict_error: data key "data.tenants.acme.tools" is already set by a.json`,
		},
		{
			name: "object and scalar",
			data: []policy.File{
				{Path: "a.json", Data: []byte(`{"flag": {"on": true}}`)},
				{Path: "b.json", Data: []byte(`{"flag": true}`)},
			},
			want: `b.json: conflict_error: data key "data.flag" is already set by a.json`,
		},
		{
			name: "JSON syntax error",
			data: []policy.File{{Path: "a.json", Data: []byte("{\n  \"a\": 1,\n  \"b\": ]\n}")}},
			want: "a.json:3:8: parse_error: parsing JSON: invalid character ']' looking for beginning of value\n  \"b\": ]\n       ^",
		},
		{
			name: "YAML syntax error",
			data: []policy.File{{Path: "a.yaml", Data: []byte("a: 1\n\tb: 2\n")}},
			want: "a.yaml:2: parse_error: parsing YAML: yaml: line 2: found a tab character that violates indentation\n\tb: 2",
		},
		{
			name: "top level not an object",
			data: []policy.File{{Path: "a.json", Data: []byte(`[1, 2]`)}},
			want: "a.json: parse_error: a data file must hold an object at the top level",
		},
		{
			name: "two JSON values",
			data: []policy.File{{Path: "a.json", Data: []byte("{}\n{}")}},
			want: "a.json:2:1: parse_error: parsing JSON: more than one value in the file\n{}\n^",
		},
		{
			name:    "data overlapping a rule",
			modules: []policy.File{rule},
			data:    []policy.File{{Path: "a.json", Data: []byte(`{"flag": true, "turngate": {"tool_call": {"block": ["x"]}}}`)}},
			want:    "a.rego:3:1: compile_error: conflicting rule for data path turngate/tool_call/block found\nblock contains \"x\" if data.flag\n^",
		},
		{
			name: "unsupported extension",
			data: []policy.File{{Path: "a.toml", Data: []byte(`a = 1`)}},
			want: `a.toml: parse_error: unsupported data file extension ".toml" (want .json, .yaml or .yml)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Compile(tt.modules, tt.data, testOptions)
			if got := errs.Error(); errs == nil || got != tt.want {
				t.Errorf("errors:\n%v\nwant:\n%s", errs, tt.want)
			}
		})
	}
}

func TestCompileRejectsRetiredInputNames(t *testing.T) {
	src := "package turngate.tool_call\n\nblock contains \"late\" if {\n\tinput.step_number > 3\n\tsome c in input.previous_calls\n\tc.toolName == \"x\"\n}\n"
	_, errs := Compile([]policy.File{{Path: "old.rego", Data: []byte(src)}}, nil, testOptions)
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2: %v", len(errs), errs)
	}
	for i, want := range []struct {
		line, col int
		msg       string
	}{
		{4, 8, "input.step_number was renamed: use input.stepNumber"},
		{5, 18, "input.previous_calls was renamed: use input.previousCalls"},
	} {
		e := errs[i]
		if e.Location.Line != want.line || e.Location.Column != want.col || !strings.Contains(e.Message, want.msg) {
			t.Errorf("error %d = %v, want %d:%d %q", i, e, want.line, want.col, want.msg)
		}
	}
}
