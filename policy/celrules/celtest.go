package celrules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// TestResult is the outcome of one test case.
type TestResult struct {
	File     string
	Name     string
	Location policy.Location
	Passed   bool
	// Message says why a case failed (empty when it passed).
	Message string
	// Exercised are the ids of the rules the case fired (shadow rules
	// among them, enforced in tests) and of the rule whose evaluation
	// failed, for coverage.
	Exercised []string
}

// testCase is one parsed case of a *_test.yaml file.
type testCase struct {
	name      string
	hook      string
	node      *yaml.Node
	input     *Input
	expect    map[string]any // JSON-normalised expected field values
	noMatch   bool
	wantError string
}

// RunTests runs the cases of CEL test files against s. A test file is
//
//	cases:
//	  - name: cheap model on continuations
//	    hook: beforeTurn            # or beforeStep, beforePersist, onChatError
//	    input: {turn: {continuation: true}}   # an Input (see Input)
//	    expect: {model: fast}       # these fields have these values
//	  - name: nothing for first turns
//	    hook: beforeTurn
//	    input: {turn: {continuation: false}}
//	    expectNoMatch: true         # no rule fires
//	  - name: runaway rule fails
//	    hook: beforeTurn
//	    input: {}
//	    expectError: cost           # evaluation fails with this substring
//
// expect is a subset check: fields it does not name may be set by other
// rules. Values are compared as JSON (toolChoice as "auto" or a map). A
// beforePersist case expects message (the message as stored, whole) and
// masked (how many matches were replaced); an onChatError case expects
// message (the text shown).
// Cases see shadow rules as enforced, as Rego tests do: a shadow rule's
// tests are written as they will hold once it is promoted, so promoting
// it changes no test's outcome (rules/README.md, "Shadow rules"). Test
// files that cannot be read are reported as errors with positions; case
// failures are results.
func RunTests(s *Set, files []policy.File) ([]TestResult, policy.Errors) {
	s = s.promoted()
	var (
		results []TestResult
		errs    policy.Errors
	)
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b policy.File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		src := newSource(f)
		cases, cerrs := parseTests(src)
		errs = append(errs, cerrs...)
		for _, c := range cases {
			results = append(results, runCase(s, src, c))
		}
	}
	if len(errs) > policy.MaxErrors {
		errs = errs[:policy.MaxErrors]
	}
	return results, errs
}

func runCase(s *Set, src *source, c *testCase) TestResult {
	res := TestResult{
		File:     src.path,
		Name:     c.name,
		Location: policy.Location{File: src.path, Line: c.node.Line, Column: c.node.Column},
	}
	cfg, tr, err := s.Eval(context.Background(), c.hook, c.input)
	res.Message = checkCase(c, cfg, tr, err)
	res.Passed = res.Message == ""
	res.Exercised = tr.RulesFired
	if pe, ok := errors.AsType[*policy.Error](err); ok && pe.Rule != "" {
		res.Exercised = append(slices.Clip(res.Exercised), pe.Rule)
	}
	return res
}

// checkCase returns why a case failed, or "".
func checkCase(c *testCase, cfg any, tr Trace, err error) string {
	switch {
	case c.wantError != "":
		if err == nil {
			return fmt.Sprintf("want an error containing %q, got none (rules fired: %v)", c.wantError, tr.RulesFired)
		}
		if !strings.Contains(err.Error(), c.wantError) {
			return fmt.Sprintf("want an error containing %q, got: %v", c.wantError, err)
		}
		return ""
	case err != nil:
		return "evaluation failed: " + err.Error()
	}
	var problems []string
	if c.noMatch && len(tr.RulesFired) > 0 {
		problems = append(problems, fmt.Sprintf("want no rule to fire, got %s", strings.Join(tr.RulesFired, ", ")))
	}
	problems = append(problems, compareFields(c.expect, Fields(cfg), tr.RulesFired, tr.SetBy)...)
	return strings.Join(problems, "; ")
}

// compareFields lists how got differs from the expected field values.
func compareFields(want, got map[string]any, fired []string, setBy map[string]string) []string {
	var problems []string
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("field %s: not set (rules fired: %v)", k, fired))
		case !reflect.DeepEqual(g, want[k]):
			problems = append(problems, fmt.Sprintf("field %s: want %s, got %s (set by %s)", k, jsonText(want[k]), jsonText(g), setBy[k]))
		}
	}
	return problems
}

func jsonText(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// parseTests reads a test file's cases, reporting malformed ones with
// positions.
func parseTests(src *source) ([]*testCase, policy.Errors) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src.data, &doc); err != nil {
		return nil, policy.Errors{src.parseError(err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, policy.Errors{src.nodeError(policy.CodeSchema, root, "a test file must be a mapping with a cases list")}
	}
	var (
		cases []*testCase
		errs  policy.Errors
	)
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		if key.Value != "cases" {
			errs = append(errs, src.nodeError(policy.CodeSchema, key, fmt.Sprintf("unknown top-level key %q (want cases)", key.Value)))
			continue
		}
		if val.Kind != yaml.SequenceNode {
			errs = append(errs, src.nodeError(policy.CodeSchema, val, "cases must be a list"))
			continue
		}
		for _, cn := range val.Content {
			c, err := parseCase(src, cn)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cases = append(cases, c)
		}
	}
	return cases, errs
}

func parseCase(src *source, cn *yaml.Node) (*testCase, *policy.Error) {
	if cn.Kind != yaml.MappingNode {
		return nil, src.nodeError(policy.CodeSchema, cn, "a test case must be a mapping")
	}
	c := &testCase{node: cn}
	outcomes := 0
	var expectNode *yaml.Node
	for i := 0; i+1 < len(cn.Content); i += 2 {
		key, val := cn.Content[i], cn.Content[i+1]
		var err error
		switch key.Value {
		case "name":
			c.name = val.Value
		case "hook":
			c.hook = val.Value
			if c.hook != policy.HookBeforeTurn && c.hook != policy.HookBeforeStep && c.hook != policy.HookBeforePersist && c.hook != policy.HookOnChatError {
				return nil, src.nodeError(policy.CodeSchema, val, fmt.Sprintf("hook %q is not beforeTurn, beforeStep, beforePersist or onChatError", c.hook))
			}
		case "input":
			var doc any
			if err = val.Decode(&doc); err == nil {
				c.input, err = inputFrom(doc)
			}
		case "expect":
			outcomes++
			if err = decodeExpect(key.Value, val, &c.expect); err != nil {
				return nil, src.nodeError(policy.CodeSchema, val, err.Error())
			}
			expectNode = val
		case "expectShadow":
			return nil, src.nodeError(policy.CodeSchema, key,
				"expectShadow is gone: test cases see shadow rules as enforced, as Rego tests do (rules/README.md, \"Shadow rules\"), so expect checks what expectShadow did; move its fields into expect")
		case "expectNoMatch":
			outcomes++
			err = val.Decode(&c.noMatch)
		case "expectError":
			outcomes++
			c.wantError = val.Value
		default:
			return nil, src.nodeError(policy.CodeSchema, key, fmt.Sprintf(
				"unknown test case key %q (want name, hook, input, expect, expectNoMatch or expectError)", key.Value))
		}
		if err != nil {
			return nil, src.nodeError(policy.CodeSchema, val, fmt.Sprintf("%s: %v", key.Value, err))
		}
	}
	switch {
	case c.name == "":
		return nil, src.nodeError(policy.CodeSchema, cn, "test case is missing its name")
	case c.hook == "":
		return nil, src.nodeError(policy.CodeSchema, cn, fmt.Sprintf("test case %q is missing its hook", c.name))
	case outcomes != 1:
		return nil, src.nodeError(policy.CodeSchema, cn, fmt.Sprintf(
			"test case %q needs exactly one of expect, expectNoMatch or expectError", c.name))
	}
	for k := range c.expect {
		if !expectable(c.hook, k) {
			return nil, src.nodeError(policy.CodeSchema, expectNode, fmt.Sprintf("expect: unknown field %q for %s", k, c.hook))
		}
	}
	if c.input == nil {
		c.input = &Input{}
	}
	return c, nil
}

// persistResults are the results a beforePersist case may expect.
var persistResults = map[string]bool{"message": true, "masked": true}

// expectable reports whether a case of hook may expect the result k.
func expectable(hook, k string) bool {
	switch hook {
	case policy.HookBeforePersist:
		return persistResults[k]
	case policy.HookOnChatError:
		return errorFields[k] != nil
	}
	return !persistResults[k]
}

// decodeExpect reads expected field values (the value of key, expect),
// normalised through JSON so they compare equal to Fields'
// output.
func decodeExpect(key string, n *yaml.Node, dst *map[string]any) error {
	var raw map[string]any
	if err := n.Decode(&raw); err != nil {
		return fmt.Errorf("%s must map field names to values: %w", key, err)
	}
	for k := range raw {
		if f := fields[k]; (f == nil || f.decode == nil) && !persistResults[k] {
			return fmt.Errorf("%s: unknown field %q", key, k)
		}
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return err
	}
	if *dst == nil {
		*dst = map[string]any{}
	}
	return nil
}

// promoted returns s with its shadow rules enforced, as test cases see
// them; s itself when it has none.
func (s *Set) promoted() *Set {
	if !s.turnShadow && !s.stepShadow && !s.persistShadow && !s.errorShadow {
		return s
	}
	p := *s
	p.turnRules, p.stepRules, p.persistRules, p.errorRules = enforced(s.turnRules), enforced(s.stepRules), enforced(s.persistRules), enforced(s.errorRules)
	p.turnShadow, p.stepShadow, p.persistShadow, p.errorShadow = false, false, false, false
	return &p
}

// enforced copies rules with every shadow mark removed.
func enforced(rules []*rule) []*rule {
	out := make([]*rule, len(rules))
	for i, r := range rules {
		c := *r
		c.shadow = false
		out[i] = &c
	}
	return out
}
