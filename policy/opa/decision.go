package opa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	ruleApproval   = "approval"
)

// The decision document's member names as terms, built once:
// ast.InternedTerm interns few strings and allocates a term for the rest.
var (
	blockTerm      = ast.StringTerm(ruleBlock)
	substituteTerm = ast.StringTerm(ruleSubstitute)
	patchTerm      = ast.StringTerm(rulePatch)
	redactTerm     = ast.StringTerm(ruleRedact)
	approvalTerm   = ast.StringTerm(ruleApproval)
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
	case ruleApproval:
		return approvalTerm
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
	// RulesFiredAt says where each of RulesFired is defined
	// (policy.Record.RulesFiredAt).
	RulesFiredAt []string
	// Prints holds the lines print() wrote during the evaluation.
	Prints []string
	// Shadow is the outcome of the package's shadow rules (shadow.go), nil
	// when it has none.
	Shadow *policy.Shadow
	// input is the input document evaluated (see InputJSON), raws the
	// JSON bytes some of its terms were parsed from.
	input ast.Value
	raws  rawTerms
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
	approvals, approvalRefs, err := approvalReasons(obj)
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
	fired = appendRefs(fired, ToolCallPackage, ruleApproval, approvalRefs, nil)
	fired = appendOpRefs(fired, ToolCallPackage, ops)

	switch {
	case len(reasons) > 0:
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: strings.Join(reasons, "; ")}, fired, nil
	case sub != nil:
		return sub, fired, nil
	}
	var d *engine.ToolCallDecision
	if len(ops) > 0 {
		v, err := decodeDoc(modelInput, "{}")
		if err != nil {
			return nil, fired, validationError(ToolCallPackage, rulePatch, "model input: %v", err)
		}
		if v, err = applyOps(v, ops, ToolCallPackage); err != nil {
			return nil, fired, err
		}
		d = &engine.ToolCallDecision{Action: engine.ActionAllow, Input: encodeDoc(make([]byte, 0, len(modelInput)+64), v)}
	}
	if len(approvals) > 0 {
		// The approval asks about the input that would run: the patched one.
		if d == nil {
			d = &engine.ToolCallDecision{}
		}
		d.Action, d.Approvals = engine.ActionApproval, approvals
	}
	return d, fired, nil
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
	fired := appendOpRefs(nil, ToolResultPackage, ops)
	fired = appendRefs(fired, ToolResultPackage, ruleRedact, paths, strconv.Quote)
	if len(ops) == 0 && len(paths) == 0 {
		return nil, fired, nil
	}
	v, err := decodeDoc(output, "null")
	if err != nil {
		rule := ruleRedact
		if len(ops) > 0 {
			rule = rulePatch
		}
		return nil, fired, validationError(ToolResultPackage, rule, "tool output: %v", err)
	}
	if v, err = applyOps(v, ops, ToolResultPackage); err != nil {
		return nil, fired, err
	}
	for _, p := range paths {
		v = redactAt(v, p)
	}
	return &engine.ToolResultDecision{Output: encodeDoc(make([]byte, 0, len(output)+64), v)}, fired, nil
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
func patchOps(obj ast.Object, pkg string) ([]patchOp, error) {
	ts, err := members(obj, pkg, rulePatch)
	if err != nil {
		return nil, err
	}
	ops := make([]patchOp, 0, len(ts))
	var buf []byte
	for _, t := range ts {
		var op patchOp
		op, buf, err = parseOp(t.Value, buf)
		if err != nil {
			return nil, validationError(pkg, rulePatch, "op %v: %v", t, err)
		}
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(x, y patchOp) int { return strings.Compare(x.text, y.text) })
	return slices.CompactFunc(ops, func(x, y patchOp) bool { return x.text == y.text }), nil
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

// appendOpRefs appends the Rego reference data.pkg.patch[op] for each op.
func appendOpRefs(fired []string, pkg string, ops []patchOp) []string {
	for _, op := range ops {
		fired = append(fired, "data."+pkg+"."+rulePatch+"["+op.text+"]")
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
