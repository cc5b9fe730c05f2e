package opa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// Decision rule names inside the decision packages.
const (
	ruleBlock      = "block"
	ruleSubstitute = "substitute"
	rulePatch      = "patch"
	ruleRedact     = "redact"
)

// The decision document's member names as terms, built once:
// ast.InternedTerm interns few strings and allocates a term for the rest.
var (
	blockTerm      = ast.StringTerm(ruleBlock)
	substituteTerm = ast.StringTerm(ruleSubstitute)
	patchTerm      = ast.StringTerm(rulePatch)
	redactTerm     = ast.StringTerm(ruleRedact)
	opTerm         = ast.StringTerm("op")
	pathTerm       = ast.StringTerm("path")
	valueTerm      = ast.StringTerm("value")
	fromTerm       = ast.StringTerm("from")
)

// nameTerm returns name (a decision rule or a patch op member) as a term.
func nameTerm(name string) *ast.Term {
	switch name {
	case ruleBlock:
		return blockTerm
	case ruleSubstitute:
		return substituteTerm
	case rulePatch:
		return patchTerm
	case ruleRedact:
		return redactTerm
	case "op":
		return opTerm
	case "path":
		return pathTerm
	case "value":
		return valueTerm
	case "from":
		return fromTerm
	}
	return ast.StringTerm(name)
}

// Redacted replaces every value a tool_result redact path selects.
const Redacted = "[REDACTED]"

// Trace says which decision rules fired in one evaluation.
type Trace struct {
	// RulesFired lists what the decision document held, in precedence
	// order, as Rego references: data.turngate.tool_call.block["reason"]
	// for each block reason, data.turngate.tool_call.substitute, and
	// data.turngate.tool_call.patch[{…op…}] for each patch op (likewise
	// patch and redact under data.turngate.tool_result). Rules that fired
	// but lost on precedence are listed too.
	RulesFired []string
	// Prints holds the lines print() wrote during the evaluation.
	Prints []string
}

// decideToolCall maps a data.turngate.tool_call document to the engine's
// decision. modelInput is the input the model emitted (patches apply to it).
// A nil decision means allow unchanged.
func decideToolCall(doc ast.Value, modelInput json.RawMessage) (*engine.ToolCallDecision, []string, error) {
	obj, err := decisionObject(doc, ToolCallPackage)
	if err != nil {
		return nil, nil, err
	}
	reasons, err := stringMembers(obj, ToolCallPackage, ruleBlock)
	if err != nil {
		return nil, nil, err
	}
	sub, err := substitute(obj)
	if err != nil {
		return nil, nil, err
	}
	ops, err := patchOps(obj, ToolCallPackage)
	if err != nil {
		return nil, nil, err
	}

	fired := appendRefs(nil, ToolCallPackage, ruleBlock, reasons, strconv.Quote)
	if sub != nil {
		fired = append(fired, "data."+ToolCallPackage+"."+ruleSubstitute)
	}
	fired = appendRefs(fired, ToolCallPackage, rulePatch, ops, nil)

	switch {
	case len(reasons) > 0:
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: strings.Join(reasons, "; ")}, fired, nil
	case sub != nil:
		return sub, fired, nil
	case len(ops) > 0:
		patched, err := applyPatch(ops, modelInput, ToolCallPackage, "{}")
		if err != nil {
			return nil, fired, err
		}
		return &engine.ToolCallDecision{Action: engine.ActionAllow, Input: patched}, fired, nil
	}
	return nil, fired, nil
}

// decideToolResult maps a data.turngate.tool_result document to the output
// the model sees: patch ops apply first, then redactions. A nil decision
// means unchanged.
func decideToolResult(doc ast.Value, output json.RawMessage) (*engine.ToolResultDecision, []string, error) {
	obj, err := decisionObject(doc, ToolResultPackage)
	if err != nil {
		return nil, nil, err
	}
	ops, err := patchOps(obj, ToolResultPackage)
	if err != nil {
		return nil, nil, err
	}
	paths, err := stringMembers(obj, ToolResultPackage, ruleRedact)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		if p != "" && !strings.HasPrefix(p, "/") {
			return nil, nil, validationError(ToolResultPackage, ruleRedact, "path %q is not a JSON pointer (it must be empty or start with /)", p)
		}
	}
	fired := appendRefs(nil, ToolResultPackage, rulePatch, ops, nil)
	fired = appendRefs(fired, ToolResultPackage, ruleRedact, paths, strconv.Quote)
	if len(ops) == 0 && len(paths) == 0 {
		return nil, fired, nil
	}
	out := output
	if len(ops) > 0 {
		if out, err = applyPatch(ops, out, ToolResultPackage, "null"); err != nil {
			return nil, fired, err
		}
	}
	if len(paths) > 0 {
		if out, err = redact(out, paths); err != nil {
			return nil, fired, err
		}
	}
	return &engine.ToolResultDecision{Output: out}, fired, nil
}

func decisionObject(doc ast.Value, pkg string) (ast.Object, error) {
	obj, ok := doc.(ast.Object)
	if !ok {
		return nil, &policy.Error{Code: policy.CodeValidation, Message: fmt.Sprintf("data.%s is %s, want an object", pkg, ast.ValueName(doc))}
	}
	return obj, nil
}

// members returns the elements of a set (or array) rule, or nil if the
// rule is absent.
func members(obj ast.Object, pkg, rule string) ([]*ast.Term, error) {
	t := obj.Get(nameTerm(rule))
	if t == nil {
		return nil, nil
	}
	switch v := t.Value.(type) {
	case ast.Set:
		return v.Slice(), nil
	case *ast.Array:
		out := make([]*ast.Term, v.Len())
		for i := range out {
			out[i] = v.Elem(i)
		}
		return out, nil
	}
	return nil, validationError(pkg, rule, "is %s, want a set (write `%s contains …`)", ast.ValueName(t.Value), rule)
}

// stringMembers returns a set-of-strings rule's members, sorted.
func stringMembers(obj ast.Object, pkg, rule string) ([]string, error) {
	ts, err := members(obj, pkg, rule)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		s, ok := t.Value.(ast.String)
		if !ok {
			return nil, validationError(pkg, rule, "member %v is %s, want a string", t, ast.ValueName(t.Value))
		}
		out = append(out, string(s))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// substitute reads the substitute rule: {"output": any, "input"?: any}.
func substitute(obj ast.Object) (*engine.ToolCallDecision, error) {
	t := obj.Get(substituteTerm)
	if t == nil {
		return nil, nil
	}
	sub, ok := t.Value.(ast.Object)
	if !ok {
		return nil, validationError(ToolCallPackage, ruleSubstitute, "is %s, want an object {\"output\": …}", ast.ValueName(t.Value))
	}
	d := &engine.ToolCallDecision{Action: engine.ActionSubstitute}
	var err error
	for _, k := range sub.Keys() {
		key, _ := k.Value.(ast.String)
		switch key {
		case "output":
			d.Output, err = marshalValue(sub.Get(k).Value)
		case "input":
			d.Input, err = marshalValue(sub.Get(k).Value)
		default:
			return nil, validationError(ToolCallPackage, ruleSubstitute, "has unknown key %v (want output and optionally input)", k)
		}
		if err != nil {
			return nil, validationError(ToolCallPackage, ruleSubstitute, "%v", err)
		}
	}
	if d.Output == nil {
		return nil, validationError(ToolCallPackage, ruleSubstitute, "has no output")
	}
	return d, nil
}

// patchOps validates the patch rule's operations and returns them sorted by
// canonical JSON (object keys sorted), the deterministic application order.
func patchOps(obj ast.Object, pkg string) ([]string, error) {
	ts, err := members(obj, pkg, rulePatch)
	if err != nil {
		return nil, err
	}
	ops := make([]string, 0, len(ts))
	for _, t := range ts {
		op, err := validateOp(t.Value)
		if err != nil {
			return nil, validationError(pkg, rulePatch, "op %v: %v", t, err)
		}
		ops = append(ops, string(op))
	}
	slices.Sort(ops)
	return slices.Compact(ops), nil
}

// opFields lists each RFC 6902 op's required members besides op and path.
var opFields = map[string][]string{
	"add":     {"value"},
	"remove":  nil,
	"replace": {"value"},
	"move":    {"from"},
	"copy":    {"from"},
	"test":    {"value"},
}

func validateOp(v ast.Value) ([]byte, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("is %s, want an object {\"op\", \"path\", …}", ast.ValueName(v))
	}
	opMember := obj.Get(opTerm)
	if opMember == nil {
		return nil, fmt.Errorf("has no \"op\"")
	}
	name, ok := opMember.Value.(ast.String)
	if !ok {
		return nil, fmt.Errorf("\"op\" is not a string")
	}
	required, known := opFields[string(name)]
	if !known {
		return nil, fmt.Errorf("unknown op %q (want add, remove, replace, move, copy or test)", string(name))
	}
	for _, f := range append([]string{"path"}, required...) {
		t := obj.Get(nameTerm(f))
		if t == nil {
			return nil, fmt.Errorf("%s op has no %q", name, f)
		}
		if f == "value" {
			continue
		}
		s, ok := t.Value.(ast.String)
		if !ok || (s != "" && !strings.HasPrefix(string(s), "/")) {
			return nil, fmt.Errorf("%q is not a JSON pointer (it must be a string, empty or starting with /)", f)
		}
	}
	return marshalValue(obj)
}

// applyPatch applies ops in order to doc (empty doc means emptyDoc). Each op
// is applied alone so a failure names the op.
func applyPatch(ops []string, doc json.RawMessage, pkg, emptyDoc string) (json.RawMessage, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = json.RawMessage(emptyDoc)
	}
	out := []byte(doc)
	for _, op := range ops {
		p, err := jsonpatch.DecodePatch([]byte("[" + op + "]"))
		if err != nil {
			return nil, validationError(pkg, rulePatch, "op %s: %v", op, err)
		}
		if out, err = p.Apply(out); err != nil {
			return nil, validationError(pkg, rulePatch, "applying op %s: %v", op, err)
		}
	}
	return out, nil
}

// redact replaces the value at each JSON pointer in paths with Redacted.
// Paths that select nothing are skipped: there is nothing to hide.
func redact(doc json.RawMessage, paths []string) (json.RawMessage, error) {
	v, err := decodeJSON(doc, nil)
	if err != nil {
		return nil, validationError(ToolResultPackage, ruleRedact, "tool output: %v", err)
	}
	for _, p := range paths {
		v = redactPointer(v, p)
	}
	return marshalJSON(v)
}

// redactPointer replaces the value at pointer p within v.
func redactPointer(v any, p string) any {
	if p == "" {
		return Redacted
	}
	tokens := strings.Split(p[1:], "/")
	cur := v
	for i, tok := range tokens {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		last := i == len(tokens)-1
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return v
			}
			if last {
				c[tok] = Redacted
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(c) {
				return v
			}
			if last {
				c[n] = Redacted
			}
			cur = c[n]
		default:
			return v
		}
	}
	return v
}

// appendRefs appends the Rego reference data.pkg.rule[key] for each member
// key of a set rule; quote, if not nil, renders a string key as a literal.
func appendRefs(fired []string, pkg, rule string, keys []string, quote func(string) string) []string {
	for _, k := range keys {
		if quote != nil {
			k = quote(k)
		}
		fired = append(fired, "data."+pkg+"."+rule+"["+k+"]")
	}
	return fired
}

// marshalValue renders an ast.Value as canonical JSON (sets become arrays,
// object keys sorted).
func marshalValue(v ast.Value) ([]byte, error) {
	x, err := ast.JSON(v)
	if err != nil {
		return nil, err
	}
	return marshalJSON(x)
}

// marshalJSON encodes without HTML escaping, so outputs read as written.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// validationError reports a malformed decision rule; Rule names it as
// data.<pkg>.<rule> so the caller can point at its definition.
func validationError(pkg, rule, format string, args ...any) *policy.Error {
	return &policy.Error{Code: policy.CodeValidation, Rule: "data." + pkg + "." + rule, Message: fmt.Sprintf(format, args...)}
}
