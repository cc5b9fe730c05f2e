package opa

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
)

// refError converts OPA's "undefined ref" type error into a diagnostic at
// the key that does not exist, naming what exists there and the closest
// name ("did you mean input.tool.name?"). ok is false for other errors.
func (b *build) refError(e *ast.Error) (*policy.Error, bool) {
	if e.Code != ast.TypeErr {
		return nil, false
	}
	var ref ast.Ref
	var pos int
	var msg string
	switch d := e.Details.(type) {
	case *ast.RefErrInvalidDetail:
		ref, pos = d.Ref, d.Pos
		prefix := ref[:pos]
		switch {
		case len(d.OneOf) > 0:
			msg = fmt.Sprintf("%v has no key %v", prefix, ref[pos]) + keyHint(prefix, ref[pos], d.OneOf)
		case d.Want == nil:
			msg = fmt.Sprintf("%v has no keys", prefix)
		case d.Have != nil:
			msg = fmt.Sprintf("%v is indexed by %v, not %v", prefix, types.Sprint(d.Want), types.Sprint(d.Have))
		default:
			msg = fmt.Sprintf("%v has no key %v (its keys are %v)", prefix, ref[pos], types.Sprint(d.Want))
		}
	case *ast.RefErrUnsupportedDetail:
		if _, fn := d.Have.(*types.Function); fn {
			return nil, false
		}
		ref, pos = d.Ref, d.Pos
		msg = fmt.Sprintf("%v is %v, which has no fields", ref[:pos+1], types.Sprint(d.Have))
	default:
		return nil, false
	}
	loc := e.Location
	if pos < len(ref) && ref[pos].Location != nil {
		loc = ref[pos].Location
	}
	if loc != nil && b.retired[location{loc.File, loc.Row, loc.Col}] {
		return nil, true // already reported, naming the new name
	}
	return b.src.error(policy.CodeType, loc, fmt.Sprintf("undefined ref %v: %s", ref, msg)), true
}

// keyHint returns " (did you mean …?)" naming the candidate key closest to
// key when one is close enough to be a typo, else the keys there are.
func keyHint(prefix ast.Ref, key *ast.Term, candidates []ast.Value) string {
	names := make([]string, 0, len(candidates))
	for _, c := range candidates {
		if n, ok := c.(ast.String); ok {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if s, ok := key.Value.(ast.String); ok {
		if best := suggest.Closest(string(s), names); best != "" {
			return fmt.Sprintf("; did you mean %v?", prefix.Append(ast.StringTerm(best)))
		}
	}
	const maxListed = 12
	if len(names) > maxListed {
		names = append(names[:maxListed], "…")
	}
	return fmt.Sprintf(" (it has %s)", strings.Join(names, ", "))
}

// decisionTypes states the type each decision rule's value must be able to
// have, by rule name: check reports why a type t cannot be right, or "".
var decisionTypes = map[string]struct {
	want  string
	check func(t types.Type) string
}{
	ruleBlock:      {"a set of strings", setOf(types.S, "a string")},
	ruleRedact:     {"a set of JSON pointers (strings)", setOf(types.S, "a string")},
	rulePatch:      {"a set of RFC 6902 operation objects", setOf(nil, "an object with op and path")},
	ruleSubstitute: {`an object {"output": …} with an optional "input"`, substituteType},
	ruleApproval:   {`a set of reasons: strings or objects {"reason": …, "approvers": ["role:NAME", …]}`, setWhere(approvalType, `a string or an object {"reason": …, "approvers": […]}`)},
}

// checkDecisionTypes reports every decision rule (block, substitute, patch,
// redact in the decision packages) whose value's inferred type cannot be
// the one the decision needs: `block contains 42` or `substitute :=
// "cached"` is a load error at the rule, not a failed evaluation later.
// Each definition's head is typed on its own (a literal, a data ref); then
// the rule's type in the compiler's type environment, the union of every
// definition's, is checked: when no member of the union can be right, no
// definition can. A wrong value that only some definitions' bodies produce
// is left to evaluation, which fails closed naming the definitions.
func (b *build) checkDecisionTypes(c *ast.Compiler) {
	for _, m := range c.Modules {
		if !m.Package.Path.Equal(toolCallRef) && !m.Package.Path.Equal(toolResultRef) {
			continue
		}
		for _, r := range m.Rules {
			name := r.Head.Ref()[0].String()
			dt, ok := decisionTypes[name]
			if !ok || len(r.Head.Args) > 0 || len(r.Head.Ref()) > 1 ||
				(name == ruleSubstitute || name == ruleApproval) && m.Package.Path.Equal(toolResultRef) { // a helper there
				continue
			}
			path := m.Package.Path.Append(ast.StringTerm(name))
			why := ""
			if t := headType(c.TypeEnv, r); t != nil {
				why = dt.check(t)
			}
			if t := c.TypeEnv.GetByRef(path); why == "" && t != nil {
				why = dt.check(t)
			}
			if why != "" {
				e := b.src.error(policy.CodeType, r.Location, fmt.Sprintf("%s must be %s, but %s", name, dt.want, why))
				e.Rule = path.String()
				b.errs = append(b.errs, e)
			}
		}
	}
}

// headType is the type of r's value as its head states it: a set of the
// key's type for `contains` rules, the value's type otherwise; nil when
// the head is a variable or call only the body determines.
func headType(env *ast.TypeEnv, r *ast.Rule) types.Type {
	if r.Head.RuleKind() == ast.MultiValue {
		if k := known(env, r.Head.Key); k != nil {
			return types.NewSet(k)
		}
		return nil
	}
	if r.Head.Value == nil {
		return nil
	}
	return known(env, r.Head.Value)
}

// known returns t's type when it does not depend on the rule body's
// variables.
func known(env *ast.TypeEnv, t *ast.Term) types.Type {
	unknown := false
	ast.WalkTerms(t, func(x *ast.Term) bool {
		switch x.Value.(type) {
		case ast.Var, ast.Call:
			unknown = true
		case ast.Ref:
			// A ref's head may be a local variable.
			_, local := x.Value.(ast.Ref)[0].Value.(ast.Var)
			unknown = unknown || local && !ast.RootDocumentNames.Contains(x.Value.(ast.Ref)[0])
			return true
		}
		return unknown
	})
	if unknown {
		return nil
	}
	return env.Get(t)
}

// setOf returns a check that t is a set (or array) whose elements may have
// type elem (nil: an object with op and path, a patch op).
func setOf(elem types.Type, what string) func(types.Type) string {
	ok := func(x types.Type) bool { return types.Compare(x, elem) == 0 }
	if elem == nil {
		ok = patchOpType
	}
	return setWhere(ok, what)
}

// setWhere returns a check that t is a set (or array) whose elements may
// satisfy ok.
func setWhere(ok func(types.Type) bool, what string) func(types.Type) string {
	return func(t types.Type) string {
		var of types.Type
		switch c := unwrapType(t).(type) {
		case *types.Set:
			of = c.Of()
		case *types.Array:
			of = c.Dynamic()
			for i := range c.Len() {
				of = types.Or(of, c.Select(i))
			}
		default:
			if mayBe(t, func(types.Type) bool { return false }) {
				return ""
			}
			return "its value is " + types.Sprint(t)
		}
		if of == nil || mayBe(of, ok) {
			return ""
		}
		return fmt.Sprintf("its members are %s, not %s", types.Sprint(of), what)
	}
}

// patchOpType reports whether t may be an RFC 6902 operation object.
func patchOpType(t types.Type) bool {
	obj, ok := t.(*types.Object)
	if !ok {
		return false
	}
	if obj.DynamicProperties() != nil {
		return true
	}
	found := 0
	for _, p := range obj.StaticProperties() {
		if p.Key != "op" && p.Key != "path" {
			continue
		}
		found++
		// A nil type is one the checker could not infer (a call's result).
		if p.Value != nil && !mayBe(p.Value, func(x types.Type) bool { return types.Compare(x, types.S) == 0 }) {
			return false
		}
	}
	return found == 2
}

// substituteType checks a substitute value's type.
func substituteType(t types.Type) string {
	ok := func(x types.Type) bool {
		obj, isObj := x.(*types.Object)
		if !isObj {
			return false
		}
		if obj.DynamicProperties() != nil {
			return true
		}
		hasOutput := false
		for _, p := range obj.StaticProperties() {
			switch p.Key {
			case "output":
				hasOutput = true
			case "input":
			default:
				return false
			}
		}
		return hasOutput
	}
	if mayBe(t, ok) {
		return ""
	}
	return "its value is " + types.Sprint(t)
}

// mayBe reports whether a value of type t may satisfy ok: any type may,
// a union may when one of its members may.
func mayBe(t types.Type, ok func(types.Type) bool) bool {
	t = unwrapType(t)
	if any, isAny := t.(types.Any); isAny {
		if len(any) == 0 {
			return true
		}
		return slices.ContainsFunc(any, func(x types.Type) bool { return mayBe(x, ok) })
	}
	return t == nil || ok(t)
}

// unwrapType strips names and recursion from t.
func unwrapType(t types.Type) types.Type {
	for {
		switch x := t.(type) {
		case *types.NamedType:
			t = x.Type
		case *types.Recursive:
			t = x.Unwrap()
		default:
			return t
		}
	}
}
