package opa

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// stateRoot is input.state, under which the declared state is read.
var stateRoot = ast.MustParseRef("input.state")

// StateReads returns the names of the declared states the rules of the
// decision package pkg may read (input.state.NAME in its modules and in
// the modules of the other, non-decision packages they may call), sorted.
// A read the compiler cannot name (input.state[x], input.state as a whole)
// reads every declared state. The gateway computes only these for the
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
			// is input itself taken whole.
			if ref.Equal(ast.InputRootRef) {
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
