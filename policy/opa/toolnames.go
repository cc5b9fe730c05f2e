package opa

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/policy"
)

// ToolNames returns the tool names the modules spell out as literals where
// they compare a tool's name: input.tool.name == "delete" (either side,
// also != and =), input.tool.name in {"a", "b"} (a literal set or array,
// or a rule of the module that is one: names := {"a", "b"}, names
// contains "a"), and the same of input.previousCalls[_].toolName — also
// through the local variables a rule binds to them (t := input.tool;
// t.name == "x", some c in input.previousCalls; c.toolName == "x").
// `turngate check --config` warns about those no configured tool has.
func (p *Policy) ToolNames() []policy.ToolName { return slices.Clone(p.toolNames) }

// toolNames finds the literals of ToolNames in parsed, by file and position.
func (b *build) toolNames(parsed map[string]*ast.Module) []policy.ToolName {
	var out []policy.ToolName
	add := func(t *ast.Term) {
		s, ok := t.Value.(ast.String)
		if !ok || t.Location == nil {
			return
		}
		e := b.src.error("", t.Location, "")
		out = append(out, policy.ToolName{Name: string(s), Location: e.Location, Snippet: e.Snippet})
	}
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		lists := literalLists(m)
		for _, r := range m.Rules {
			vars := bindings(r)
			names := func(t *ast.Term) bool { return namesTool(resolve(t, vars)) }
			ast.WalkExprs(r, func(e *ast.Expr) bool {
				if !e.IsCall() {
					return false
				}
				ops := e.Operands()
				if len(ops) != 2 {
					return false
				}
				switch e.Operator().String() {
				case ast.Equality.Name, ast.Equal.Name, ast.NotEqual.Name:
					if names(ops[0]) {
						add(ops[1])
					} else if names(ops[1]) {
						add(ops[0])
					}
				case ast.Member.Name:
					if !names(ops[0]) {
						return false
					}
					list := ops[1]
					if v, ok := list.Value.(ast.Var); ok && lists[v] != nil {
						for _, t := range lists[v] {
							add(t)
						}
						return false
					}
					switch c := list.Value.(type) {
					case ast.Set:
						c.Foreach(add)
					case *ast.Array:
						c.Foreach(add)
					}
				}
				return false
			})
		}
	}
	return out
}

// literalLists maps each rule of m whose whole value is a literal set or
// array (names := {"a", "b"}), or whose bodiless contains rules add
// literals (names contains "a"), to those elements.
func literalLists(m *ast.Module) map[ast.Var][]*ast.Term {
	lists := map[ast.Var][]*ast.Term{}
	for _, r := range m.Rules {
		ref := r.Head.Ref()
		if len(ref) != 1 || !r.Body.Equal(ast.NewBody(ast.NewExpr(ast.BooleanTerm(true)))) {
			continue
		}
		name, ok := ref[0].Value.(ast.Var)
		if !ok {
			continue
		}
		switch {
		case r.Head.Value != nil:
			switch c := r.Head.Value.Value.(type) {
			case ast.Set:
				c.Foreach(func(t *ast.Term) { lists[name] = append(lists[name], t) })
			case *ast.Array:
				c.Foreach(func(t *ast.Term) { lists[name] = append(lists[name], t) })
			}
		case r.Head.Key != nil:
			lists[name] = append(lists[name], r.Head.Key)
		}
	}
	return lists
}

// bindings maps the local variables of rule r that stand for a tool's
// name, the called tool or an earlier call (t := input.tool, n =
// input.tool.name, some c in input.previousCalls, every c in …) to what
// they stand for.
func bindings(r *ast.Rule) map[ast.Var]ast.Ref {
	vars := map[ast.Var]ast.Ref{}
	bind := func(v, to *ast.Term) bool {
		name, ok := v.Value.(ast.Var)
		if !ok {
			return false
		}
		ref, ok := resolve(to, vars).Value.(ast.Ref)
		if !ok || !ref[0].Equal(ast.InputRootDocument) {
			return false
		}
		if _, seen := vars[name]; seen {
			return false
		}
		vars[name] = ref
		return true
	}
	element := func(v, of *ast.Term) bool {
		if ref, ok := resolve(of, vars).Value.(ast.Ref); ok {
			return bind(v, ast.RefTerm(append(ref.Copy(), ast.VarTerm("_"))...))
		}
		return false
	}
	// Until nothing new is bound: a binding may use one made later on.
	for changed := true; changed; {
		changed = false
		ast.WalkExprs(r, func(e *ast.Expr) bool {
			switch t := e.Terms.(type) {
			case *ast.SomeDecl:
				for _, s := range t.Symbols {
					if call, ok := s.Value.(ast.Call); ok && len(call) >= 3 {
						changed = element(call[len(call)-2], call[len(call)-1]) || changed
					}
				}
			case *ast.Every:
				changed = element(t.Value, t.Domain) || changed
			}
			if !e.IsCall() || len(e.Operands()) != 2 {
				return false
			}
			if op := e.Operator().String(); op == ast.Assign.Name || op == ast.Equality.Name {
				a, b := e.Operands()[0], e.Operands()[1]
				changed = bind(a, b) || bind(b, a) || changed
			}
			return false
		})
	}
	return vars
}

// resolve returns t with a leading variable of vars replaced by what it
// stands for (c.toolName for c bound to input.previousCalls[_] is
// input.previousCalls[_].toolName).
func resolve(t *ast.Term, vars map[ast.Var]ast.Ref) *ast.Term {
	switch v := t.Value.(type) {
	case ast.Var:
		if ref, ok := vars[v]; ok {
			return ast.RefTerm(ref...)
		}
	case ast.Ref:
		if head, ok := v[0].Value.(ast.Var); ok {
			if ref, ok := vars[head]; ok {
				return ast.RefTerm(append(ref.Copy(), v[1:]...)...)
			}
		}
	}
	return t
}

// namesTool reports whether t is input.tool.name or
// input.previousCalls[_].toolName.
func namesTool(t *ast.Term) bool {
	ref, ok := t.Value.(ast.Ref)
	if !ok || len(ref) < 3 || !ref[0].Equal(ast.InputRootDocument) {
		return false
	}
	key := func(i int) string {
		s, _ := ref[i].Value.(ast.String)
		return string(s)
	}
	switch {
	case len(ref) == 3:
		return key(1) == "tool" && key(2) == "name"
	case len(ref) == 4:
		return key(1) == "previousCalls" && key(3) == "toolName"
	}
	return false
}
