package opa

import (
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/policy"
)

// stateRoot is input.state, under which the declared state is read.
var stateRoot = ast.MustParseRef("input.state")

// StateReads returns the names of the declared states the rules of the
// decision package pkg may read (input.state.NAME in its modules and in
// the modules of the other, non-decision packages they may call), sorted.
// A read the compiler cannot name (input.state[x], input.state or input
// as a whole, input[x]) reads every declared state. The gateway computes only these for the
// package's events; none means no store access at all.
func (p *Policy) StateReads(pkg string) []string {
	if p == nil {
		return nil
	}
	return p.stateReads[pkg]
}

// stateReadsOf derives StateReads for both decision packages from the
// policy modules, shadow modules included (their rules see the same
// input).
func stateReadsOf(modules map[string]*ast.Module, declared []string) map[string][]string {
	if len(declared) == 0 {
		return nil
	}
	byPkg := map[string]map[string]bool{ToolCallPackage: {}, ToolResultPackage: {}}
	shared := map[string]bool{}
	for _, m := range modules {
		into := shared
		switch {
		case m.Package.Path.Equal(toolCallRef):
			into = byPkg[ToolCallPackage]
		case m.Package.Path.Equal(toolResultRef):
			into = byPkg[ToolResultPackage]
		}
		collectStateReads(m, declared, into)
	}
	out := map[string][]string{}
	for pkg, names := range byPkg {
		maps.Copy(names, shared)
		if len(names) > 0 {
			out[pkg] = slices.Sorted(maps.Keys(names))
		}
	}
	return out
}

// collectStateReads adds to names the declared states m reads.
func collectStateReads(m *ast.Module, declared []string, names map[string]bool) {
	all := func() {
		for _, n := range declared {
			names[n] = true
		}
	}
	visit := func(ref ast.Ref) {
		if !ref.HasPrefix(stateRoot) {
			// An input.state reached through a variable (x := input; x.state.n)
			// is input itself taken whole, and input[k] may be input.state.
			if ref.Equal(ast.InputRootRef) || ref.HasPrefix(ast.InputRootRef) && !ref[1].IsGround() {
				all()
			}
			return
		}
		if len(ref) <= len(stateRoot) {
			all()
			return
		}
		if s, ok := ref[len(stateRoot)].Value.(ast.String); ok {
			names[string(s)] = true
			return
		}
		all()
	}
	for _, imp := range m.Imports {
		if ref, ok := imp.Path.Value.(ast.Ref); ok {
			visit(ref)
		}
	}
	ast.WalkRules(m, func(r *ast.Rule) bool {
		ast.WalkRefs(r, func(ref ast.Ref) bool {
			visit(ref)
			return false
		})
		return false
	})
}

// declaredStates returns the state names a StateSchema declares.
func declaredStates(schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}

// stateHint is keyHint for input.state, or that no state is declared.
func stateHint(key *ast.Term, candidates []ast.Value) string {
	if len(candidates) == 0 {
		return "; this rule set declares no state (state.yaml, *.state.yaml)"
	}
	return keyHint(stateRoot, key, candidates)
}

// objectGet is the builtin a rule reads a key with a default through.
var objectGet = ast.MustParseRef("object.get")

// checkStateGets reports each object.get(input.state, "NAME", default)
// whose NAME no declaration declares, with a did-you-mean: the type
// checker does not see into object.get, so a misspelt name there read the
// default on every call (a limit switched off by a typo). input.state may
// be named directly, through an import alias or through a variable of
// the rule bound to it (s := input.state); a key path ["NAME", ...] is
// checked by its first name. A computed key is not checked. With no state
// declared, every input.state.NAME is reported too.
func (b *build) checkStateGets(parsed map[string]*ast.Module, declared []string) {
	candidates := make([]ast.Value, len(declared))
	for i, n := range declared {
		candidates[i] = ast.String(n)
	}
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		aliases := map[ast.Var]bool{}
		for _, imp := range m.Imports {
			if ref, ok := imp.Path.Value.(ast.Ref); ok && ref.Equal(stateRoot) && imp.Alias != "" {
				aliases[imp.Alias] = true
			}
		}
		ast.WalkRules(m, func(r *ast.Rule) bool {
			vars := maps.Clone(aliases)
			ast.WalkExprs(r, func(e *ast.Expr) bool {
				if e.IsAssignment() || e.IsEquality() {
					ops := e.Operands()
					if v, ok := ops[0].Value.(ast.Var); ok {
						if ref, ok := ops[1].Value.(ast.Ref); ok && ref.Equal(stateRoot) {
							vars[v] = true
						}
					}
				}
				return false
			})
			isState := func(t *ast.Term) bool {
				switch v := t.Value.(type) {
				case ast.Ref:
					return v.Equal(stateRoot)
				case ast.Var:
					return vars[v]
				}
				return false
			}
			check := func(op ast.Ref, args []*ast.Term) {
				if !op.Equal(objectGet) || len(args) != 3 || !isState(args[0]) {
					return
				}
				key := args[1]
				if a, ok := key.Value.(*ast.Array); ok && a.Len() > 0 {
					key = a.Elem(0)
				}
				s, ok := key.Value.(ast.String)
				if !ok || slices.Contains(declared, string(s)) {
					return
				}
				loc := key.Location
				if loc == nil {
					loc = args[0].Location
				}
				b.errs = append(b.errs, b.src.error(policy.CodeType, loc,
					fmt.Sprintf("object.get reads undefined state %v: input.state has no key %v", key, key)+stateHint(key, candidates)))
			}
			if len(declared) == 0 {
				// The type checker takes input.state's closed, empty object
				// for any object: input.state.emails passed, reading nothing.
				ast.WalkRefs(r, func(ref ast.Ref) bool {
					if v, ok := ref[0].Value.(ast.Var); ok && aliases[v] {
						ref = append(stateRoot.Copy(), ref[1:]...)
					}
					if ref.HasPrefix(stateRoot) && len(ref) > len(stateRoot) {
						key := ref[len(stateRoot)]
						if _, ok := key.Value.(ast.String); ok {
							b.errs = append(b.errs, b.src.error(policy.CodeType, key.Location,
								fmt.Sprintf("undefined ref %v: input.state has no key %v", ref[:len(stateRoot)+1], key)+stateHint(key, nil)))
						}
					}
					return false
				})
			}
			ast.WalkExprs(r, func(e *ast.Expr) bool {
				if e.IsCall() {
					terms := e.Terms.([]*ast.Term)
					if op, ok := terms[0].Value.(ast.Ref); ok {
						check(op, terms[1:])
					}
				}
				return false
			})
			ast.WalkTerms(r, func(t *ast.Term) bool {
				if c, ok := t.Value.(ast.Call); ok && len(c) > 0 {
					if op, ok := c[0].Value.(ast.Ref); ok {
						check(op, c[1:])
					}
				}
				return false
			})
			return false
		})
	}
}
