package opa

import (
	"regexp"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// specialisable decides whether the package at ref of c can be specialised
// exactly (see specialise.go) and returns the residual query's outputs (one
// per rule of the package) and the multi-value helper rules partial
// evaluation must not inline.
func specialisable(c *ast.Compiler, ref ast.Ref, unknowns []*ast.Term) ([]ruleOut, []string, bool) {
	a := &knownness{c: c, unknown: unknownRefs(unknowns), known: map[*ast.Rule]bool{}, funcs: map[*ast.Rule]bool{}}
	var outs []ruleOut
	var noInline []string
	seen := map[string]bool{}
	decisions := decisionRules[ref[1:].String()]
	for _, m := range c.Modules {
		inPkg := m.Package.Path.Equal(ref)
		if !inPkg && m.Package.Path.HasPrefix(ref) {
			return nil, nil, false // a subpackage's rules are part of the document
		}
		printing := false
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() && e.Operator().Equal(ast.Print.Ref()) || e.IsCall() && e.Operator().Equal(ast.InternalPrint.Ref()) || len(e.With) > 0 {
				printing = true
			}
			return printing
		})
		if printing {
			return nil, nil, false
		}
		for _, r := range m.Rules {
			if r.Else != nil {
				return nil, nil, false
			}
			a.known[r] = true
			multi := r.Head.RuleKind() == ast.MultiValue
			if multi && !(inPkg && slices.Contains(decisions, r.Head.Ref()[0].String())) {
				noInline = append(noInline, r.Ref().GroundPrefix().String())
			}
			if !inPkg || len(r.Head.Args) > 0 {
				continue
			}
			if len(r.Head.Ref()) != 1 {
				return nil, nil, false
			}
			name := r.Head.Ref()[0].String()
			if seen[name] {
				continue
			}
			seen[name] = true
			outs = append(outs, ruleOut{name: ast.StringTerm(name), v: "__turngate_r" + name,
				decision: slices.Contains(decisions, name), single: !multi})
		}
	}
	a.settle()
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			if a.risky(r.Body) {
				return nil, nil, false
			}
		}
	}
	slices.Sort(noInline)
	return outs, slices.Compact(noInline), true
}

// knownness says which rules and expressions partial evaluation decides
// from the known input fields alone.
type knownness struct {
	c       *ast.Compiler
	unknown []ast.Ref
	// known holds, per rule, whether it reads no unknown input field, no
	// rule that does and no non-deterministic builtin: partial evaluation
	// evaluates it in full (and fails on its errors).
	known map[*ast.Rule]bool
	// funcs memoises fallibleFunc.
	funcs map[*ast.Rule]bool
}

func unknownRefs(ts []*ast.Term) []ast.Ref {
	refs := make([]ast.Ref, len(ts))
	for i, t := range ts {
		refs[i] = t.Value.(ast.Ref)
	}
	return refs
}

// settle computes known as a greatest fixpoint.
func (a *knownness) settle() {
	for changed := true; changed; {
		changed = false
		for r, k := range a.known {
			if k && a.readsUnknown(r, nil) {
				a.known[r] = false
				changed = true
			}
		}
	}
}

// readsUnknown reports whether x reads an unknown input field, a rule not
// known, a non-deterministic builtin or one of vars.
func (a *knownness) readsUnknown(x any, vars map[ast.Var]bool) bool {
	found := false
	ast.WalkTerms(x, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Var:
			found = found || vars[v]
		case ast.Ref:
			found = found || a.unknownRef(v)
		}
		return found
	})
	return found
}

func (a *knownness) unknownRef(ref ast.Ref) bool {
	switch {
	case ref.HasPrefix(ast.InputRootRef):
		return a.inputUnknown(ref)
	case ref.HasPrefix(ast.DefaultRootRef):
		for _, r := range a.c.GetRules(ref) {
			if !a.known[r] {
				return true
			}
		}
		return false
	}
	return savedBuiltin(ref)
}

// savedBuiltin reports whether ref names a builtin partial evaluation
// never evaluates (a non-deterministic one): it saves the call.
func savedBuiltin(ref ast.Ref) bool {
	bi, ok := ast.BuiltinMap[ref.String()]
	return ok && (bi.Nondeterministic || slices.Contains(ast.IgnoreDuringPartialEval, bi))
}

// inputUnknown: a ref into the input is known only when it is, or lies
// under, a known field.
func (a *knownness) inputUnknown(ref ast.Ref) bool {
	return !slices.ContainsFunc(specialisedKnown, func(k ast.Ref) bool { return ref.HasPrefix(k) })
}

// surelyUnknown reports whether x reads an unknown input field directly or
// one of vars: partial evaluation saves such an expression, it never
// fails it.
func (a *knownness) surelyUnknown(x any, vars map[ast.Var]bool) bool {
	found := false
	ast.WalkTerms(x, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Var:
			found = found || vars[v]
		case ast.Ref:
			found = found || v.HasPrefix(ast.InputRootRef) && a.inputUnknown(v) || savedBuiltin(v)
		}
		return found
	})
	return found
}

// risky reports whether partial evaluation could drop body although the
// generic evaluation would fail in it: an expression that may fail at run
// time is followed by one partial evaluation may find false.
func (a *knownness) risky(body ast.Body) bool {
	unknownVars, sureVars := map[ast.Var]bool{}, map[ast.Var]bool{}
	bound := map[ast.Var]bool{}
	g := guards{strs: map[ast.Var]bool{}, arrays: map[ast.Var]bool{}}
	mayFail := false
	for _, e := range body {
		if mayFail && !a.surelyUnknown(e, sureVars) && !a.binds(e, bound) {
			return true
		}
		for v := range e.Vars(ast.VarVisitorParams{SkipRefHead: true, SkipClosures: true}) {
			bound[v] = true
		}
		sure := a.surelyUnknown(e, sureVars)
		if !a.readsUnknown(e, unknownVars) {
			continue
		}
		for v := range e.Vars(ast.VarVisitorParams{SkipRefHead: true, SkipClosures: true}) {
			unknownVars[v] = true
			if sure {
				sureVars[v] = true
			}
		}
		mayFail = mayFail || a.fallible(e, g)
		g.note(e)
	}
	return false
}

// guards are what a body's earlier expressions proved about variables:
// strs hold strings (is_string), arrays hold arrays (a regex.find_*
// result, an array comprehension).
type guards struct{ strs, arrays map[ast.Var]bool }

func (g guards) note(e *ast.Expr) {
	if e.Negated {
		return
	}
	if e.IsCall() && e.Operator().Equal(ast.IsString.Ref()) {
		if v, ok := e.Operand(0).Value.(ast.Var); ok {
			g.strs[v] = true
		}
		return
	}
	if e.IsCall() && (e.Operator().Equal(ast.RegexFindAllStringSubmatch.Ref()) || e.Operator().Equal(ast.RegexFind.Ref())) {
		if v, ok := e.Operand(len(e.Operands()) - 1).Value.(ast.Var); ok {
			g.arrays[v] = true
		}
		return
	}
	if e.IsEquality() {
		l, r := e.Operand(0), e.Operand(1)
		lv, lok := l.Value.(ast.Var)
		if rv, ok := r.Value.(ast.Var); ok && lok {
			g.arrays[lv] = g.arrays[lv] || g.arrays[rv]
			g.arrays[rv] = g.arrays[lv]
			g.strs[lv] = g.strs[lv] || g.strs[rv]
			g.strs[rv] = g.strs[lv]
		} else if _, ok := r.Value.(*ast.ArrayComprehension); ok && lok {
			g.arrays[lv] = true
		}
	}
}

// total reports whether the builtin call e cannot fail given g: regex
// matching with a constant pattern over strings, count of an array or a
// string, sprintf of a constant format and an array.
func (g guards) total(e *ast.Expr) bool {
	args := e.Operands()
	str := func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.String:
			return true
		case ast.Var:
			return g.strs[v]
		}
		return false
	}
	array := func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case *ast.Array, *ast.ArrayComprehension:
			return true
		case ast.Var:
			return g.arrays[v]
		}
		return false
	}
	switch op := e.Operator(); {
	case op.Equal(ast.RegexMatch.Ref()) && len(args) >= 2:
		return validPattern(args[0]) && str(args[1])
	case (op.Equal(ast.RegexFindAllStringSubmatch.Ref()) || op.Equal(ast.RegexFind.Ref())) && len(args) >= 3:
		_, n := args[2].Value.(ast.Number)
		return validPattern(args[0]) && str(args[1]) && n
	case op.Equal(ast.Count.Ref()) && len(args) >= 1:
		return str(args[0]) || array(args[0])
	case op.Equal(ast.Concat.Ref()) && len(args) >= 2:
		_, ok := args[0].Value.(ast.String)
		return ok && array(args[1])
	case op.Equal(ast.Sprintf.Ref()) && len(args) >= 2:
		_, ok := args[0].Value.(ast.String)
		return ok && array(args[1])
	}
	return false
}

// validPattern reports whether t is a constant regular expression that
// compiles.
func validPattern(t *ast.Term) bool {
	s, ok := t.Value.(ast.String)
	if !ok {
		return false
	}
	_, err := regexp.Compile(string(s))
	return err == nil
}

// binds reports whether e only binds a fresh variable to a value that is
// always defined: the known input fields, constants and bound variables.
// Partial evaluation never fails such an expression.
func (a *knownness) binds(e *ast.Expr, bound map[ast.Var]bool) bool {
	if !e.IsEquality() || e.Negated {
		return false
	}
	l, r := e.Operand(0), e.Operand(1)
	if v, ok := r.Value.(ast.Var); ok && !bound[v] {
		l, r = r, l
	}
	if v, ok := l.Value.(ast.Var); !ok || bound[v] {
		return false
	}
	defined := true
	ast.WalkTerms(r, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Ref:
			defined = defined && slices.ContainsFunc(specialisedKnown, func(k ast.Ref) bool { return k.Equal(v) })
			return true
		case ast.Var:
			defined = defined && bound[v]
		case *ast.ArrayComprehension, *ast.SetComprehension, *ast.ObjectComprehension, ast.Call:
			defined = false
		}
		return !defined
	})
	return defined
}

// fallibleFunc reports whether r is a function whose body or value may
// fail.
func (a *knownness) fallibleFunc(r *ast.Rule) bool {
	if len(r.Head.Args) == 0 {
		return false
	}
	if f, ok := a.funcs[r]; ok {
		return f
	}
	a.funcs[r] = true // a recursive function is fallible
	g := guards{strs: map[ast.Var]bool{}, arrays: map[ast.Var]bool{}}
	f := false
	for _, e := range r.Body {
		f = f || a.fallible(e, g)
		g.note(e)
	}
	if r.Head.Value != nil {
		f = f || a.fallible(&ast.Expr{Terms: r.Head.Value}, g)
	}
	a.funcs[r] = f
	return f
}

// totalBuiltins never fail on any argument.
var totalBuiltins = map[string]bool{}

func init() {
	for _, bi := range []*ast.Builtin{ast.Equality, ast.Assign, ast.Equal, ast.NotEqual, ast.LessThan, ast.LessThanEq,
		ast.GreaterThan, ast.GreaterThanEq, ast.IsString, ast.IsNumber, ast.IsBoolean, ast.IsArray, ast.IsObject,
		ast.IsSet, ast.IsNull, ast.Member, ast.MemberWithKey, ast.WalkBuiltin} {
		totalBuiltins[bi.Name] = true
	}
}

// fallible reports whether e calls anything that may fail: a builtin not
// total, a function that may fail, or a rule not known.
func (a *knownness) fallible(e *ast.Expr, g guards) bool {
	if ev, ok := e.Terms.(*ast.Every); ok {
		return a.fallibleTerms(ev.Domain, g) || slices.ContainsFunc(ev.Body, func(x *ast.Expr) bool { return a.fallible(x, g) })
	}
	if !e.IsCall() {
		return a.fallibleTerms(e.Terms, g)
	}
	op := e.Operator()
	switch {
	case op.HasPrefix(ast.DefaultRootRef):
		if a.unknownRef(op) || slices.ContainsFunc(a.c.GetRules(op), a.fallibleFunc) {
			return true
		}
	case !totalBuiltins[op.String()] && !g.total(e):
		return true
	}
	return slices.ContainsFunc(e.Operands(), func(t *ast.Term) bool { return a.fallibleTerms(t, g) })
}

// fallibleTerms is fallible for the terms in x.
func (a *knownness) fallibleTerms(x any, g guards) bool {
	found := false
	check := func(b ast.Body) bool {
		for _, e := range b {
			found = found || a.fallible(e, g)
		}
		return true
	}
	ast.WalkTerms(x, func(t *ast.Term) bool {
		if found {
			return true
		}
		switch v := t.Value.(type) {
		case ast.Ref:
			found = v.HasPrefix(ast.DefaultRootRef) && a.unknownRef(v)
		case ast.Call:
			found = a.fallible(&ast.Expr{Terms: []*ast.Term(v)}, g)
			return true
		case *ast.ArrayComprehension:
			found = a.fallibleTerms(v.Term, g)
			return check(v.Body)
		case *ast.SetComprehension:
			found = a.fallibleTerms(v.Term, g)
			return check(v.Body)
		case *ast.ObjectComprehension:
			found = a.fallibleTerms(v.Key, g) || a.fallibleTerms(v.Value, g)
			return check(v.Body)
		}
		return found
	})
	return found
}
