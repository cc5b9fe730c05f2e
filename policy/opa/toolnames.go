package opa

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/policy"
)

// ToolNames returns the tool names the modules spell out as literals where
// they compare a tool's name: input.tool.name == "delete" (either side,
// also != and =), input.tool.name in {"a", "b"} (a literal set or array),
// and the same of input.previousCalls[_].toolName. `turngate check
// --config` warns about those no configured tool has.
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
		ast.WalkExprs(parsed[path], func(e *ast.Expr) bool {
			if !e.IsCall() {
				return false
			}
			ops := e.Operands()
			if len(ops) != 2 {
				return false
			}
			switch e.Operator().String() {
			case ast.Equality.Name, ast.Equal.Name, ast.NotEqual.Name:
				if namesTool(ops[0]) {
					add(ops[1])
				} else if namesTool(ops[1]) {
					add(ops[0])
				}
			case ast.Member.Name:
				if !namesTool(ops[0]) {
					return false
				}
				switch c := ops[1].Value.(type) {
				case ast.Set:
					c.Foreach(add)
				case *ast.Array:
					c.Foreach(add)
				}
			}
			return false
		})
	}
	return out
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
