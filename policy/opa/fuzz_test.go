package opa

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/policy"
)

// FuzzDecision sends arbitrary decision documents (Rego term text, so sets
// are expressible) and model inputs through both decision mappers. They
// must return a decision or a *policy.Error, never panic.
func FuzzDecision(f *testing.F) {
	seeds := []struct{ doc, input string }{
		{`{}`, `{}`},
		{`{"block": {"no delete", "tenant"}}`, `{}`},
		{`{"block": {1}}`, `{}`},
		{`{"block": ["array", "reason"]}`, `{}`},
		{`{"substitute": {"output": {"cached": true}, "input": {"x": 1}}}`, `{"x":2}`},
		{`{"substitute": {"input": 1}}`, `{}`},
		{`{"substitute": "x"}`, `{}`},
		{`{"patch": {{"op": "replace", "path": "/limit", "value": 50}}}`, `{"limit":99}`},
		{`{"patch": {{"op": "move", "from": "/a", "path": "/b"}, {"op": "copy", "from": "/b", "path": "/c"}}}`, `{"a":1}`},
		{`{"patch": {{"op": "add", "path": "/a/-/b", "value": set()}}}`, `{"a":[]}`},
		{`{"patch": {{"op": "test", "path": "", "value": null}}}`, `null`},
		{`{"redact": {"", "/a/0", "/~01"}, "patch": {{"op": "remove", "path": "/x"}}}`, `{"a":[1],"x":2}`},
		{`"not an object"`, `{}`},
		{`{"block": x, "patch": {input.y}}`, `{}`},
	}
	for _, s := range seeds {
		f.Add(s.doc, s.input)
	}
	f.Fuzz(func(t *testing.T, doc, input string) {
		term, err := ast.ParseTerm(doc)
		if err != nil {
			return
		}
		d, _, err := decideToolCall(term.Value, json.RawMessage(input))
		checkMapped(t, d != nil, err)
		if d != nil && len(d.Input) > 0 && !json.Valid(d.Input) {
			t.Fatalf("patched input %q is not JSON", d.Input)
		}
		r, _, err := decideToolResult(term.Value, json.RawMessage(input))
		checkMapped(t, r != nil, err)
		if r != nil && !json.Valid(r.Output) {
			t.Fatalf("output %q is not JSON", r.Output)
		}
	})
}

func checkMapped(t *testing.T, decided bool, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if decided {
		t.Fatalf("a decision returned with error %v", err)
	}
	if _, ok := err.(*policy.Error); !ok {
		t.Fatalf("error %T (%v) is not a *policy.Error", err, err)
	}
}

// FuzzCompile compiles arbitrary module and data sources: a policy or
// positioned errors, never a panic.
func FuzzCompile(f *testing.F) {
	for _, dir := range []string{"cookbook", "errors", "runtests", "tenants"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.rego"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b), `{"tenants": {"acme": {"tools": ["search"]}}}`, "data.json")
		}
	}
	f.Add(pkg+`block contains "x" if true`, "limits:\n  search: 25\n", "limits.data.yaml")
	f.Fuzz(func(t *testing.T, module, data, dataPath string) {
		p, errs := Compile(
			[]policy.File{{Path: "fuzz.rego", Data: []byte(module)}},
			[]policy.File{{Path: dataPath, Data: []byte(data)}},
			testOptions,
		)
		if (p == nil) == (errs == nil) {
			t.Fatalf("Compile returned policy %v and errors %v", p, errs)
		}
		for _, e := range errs {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("error without code or message: %#v", e)
			}
		}
	})
}
