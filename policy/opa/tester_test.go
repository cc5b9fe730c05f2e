package opa

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

func TestRunTests(t *testing.T) {
	rf := loadDir(t, "testdata/runtests")
	results, errs := RunTests(context.Background(), rf.modules, rf.tests, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("RunTests: %v", errs)
	}
	var got []string
	for _, r := range results {
		line := fmt.Sprintf("%s:%d %s.%s passed=%v skipped=%v", r.Location.File, r.Location.Line, r.Package, r.Name, r.Passed, r.Skipped)
		if r.Message != "" {
			line += " message=" + r.Message
		}
		if r.Output != "" {
			line += " output=" + strings.TrimSpace(r.Output)
		}
		got = append(got, line)
	}
	want := []string{
		"testdata/runtests/policy_test.rego:5 data.turngate.tool_call_test.test_user_cannot_delete passed=true skipped=false",
		"testdata/runtests/policy_test.rego:9 data.turngate.tool_call_test.test_admin_can_delete passed=true skipped=false",
		`testdata/runtests/policy_test.rego:14 data.turngate.tool_call_test.test_admin_blocked_fails passed=false skipped=false message=test failed at testdata/runtests/policy_test.rego:16:
	tool_call.block == {"only admins may delete"} with input as {"tool": {"name": "delete"}, "principal": {"roles": ["admin"]}}
	|
	set() output=block set: set()`,
		"testdata/runtests/policy_test.rego:19 data.turngate.tool_call_test.test_runtime_error passed=false skipped=false message=testdata/runtests/policy_test.rego:20: eval_builtin_error: div: divide by zero",
		"testdata/runtests/policy_test.rego:23 data.turngate.tool_call_test.todo_test_later passed=true skipped=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunTestsErrors(t *testing.T) {
	mod := policy.File{Path: "p.rego", Data: []byte(pkg + `block contains "x" if input.tool.name == "x"`)}
	tests := []struct {
		name  string
		tests []policy.File
		data  []policy.File
		want  string
	}{
		{
			name:  "sandbox applies to test files",
			tests: []policy.File{{Path: "p_test.rego", Data: []byte("package p_test\n\ntest_net if {\n\thttp.send({\"method\": \"GET\", \"url\": \"http://x\"})\n}\n")}},
			want:  "p_test.rego:4:2: sandbox_error: http.send is not allowed: network builtins are disabled in the policy sandbox\n\thttp.send({\"method\": \"GET\", \"url\": \"http://x\"})\n\t^",
		},
		{
			name:  "parse error in a test file",
			tests: []policy.File{{Path: "p_test.rego", Data: []byte("package p_test\n\ntest_x {\n\ttrue\n}\n")}},
			want:  "p_test.rego:3:1: parse_error: `if` keyword is required before rule body\ntest_x {\n^",
		},
		{
			name:  "compile error in a test file",
			tests: []policy.File{{Path: "p_test.rego", Data: []byte("package p_test\n\ntest_x if {\n\tx == 1\n}\n")}},
			want:  "p_test.rego:4:2: compile_error: var x is unsafe\n\tx == 1\n\t^",
		},
		{
			name: "bad data",
			data: []policy.File{{Path: "d.json", Data: []byte(`[]`)}},
			want: "d.json: parse_error: a data file must hold an object at the top level",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := RunTests(context.Background(), []policy.File{mod}, tt.tests, tt.data, testOptions)
			if errs == nil || errs.Error() != tt.want {
				t.Errorf("errors:\n%v\nwant:\n%s", errs, tt.want)
			}
		})
	}
}

// TestRunTestsCoverage checks the line coverage of each module: the tested
// rule is covered, the other rule's body is not, and a module no test
// reaches is reported wholly not covered. Test files are not reported.
func TestRunTestsCoverage(t *testing.T) {
	rf := loadDir(t, "testdata/coverage")
	results, cov, errs := RunTestsCoverage(context.Background(), rf.modules, rf.tests, rf.data, testOptions)
	if errs != nil {
		t.Fatalf("RunTestsCoverage: %v", errs)
	}
	if len(results) != 1 || !results[0].Passed {
		t.Fatalf("results = %+v, want one passing test", results)
	}
	want := &Coverage{
		Files: []FileCoverage{
			{File: "testdata/coverage/results.rego", CoveredLines: 0, CoverableLines: 2, NotCovered: []LineRange{{4, 5}}},
			{File: "testdata/coverage/tools.rego", CoveredLines: 3, CoverableLines: 6, NotCovered: []LineRange{{8, 10}}},
		},
		CoveredLines: 3, CoverableLines: 8,
	}
	if !reflect.DeepEqual(cov, want) {
		t.Errorf("coverage = %+v, want %+v", cov, want)
	}
}
