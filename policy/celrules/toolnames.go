package celrules

import (
	"slices"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// ToolNames returns the tool names the rules spell out as string literals:
// compared with a tool's name (t.name == "search", c.toolName != "x", also
// with in and a literal list), listed in an activeTools value, or the
// toolName of a map literal (a toolChoice or stopWhen condition). `turngate
// check --config` warns about those no configured tool has.
func (s *Set) ToolNames() []policy.ToolName { return slices.Clone(s.toolNames) }

// toolNameFields are the fields of the object types that hold a tool name.
var toolNameFields = map[string]bool{"name": true, "toolName": true}

// collectToolNames appends the tool-name literals of the checked expression
// n (setting field, "" for a condition) to c.toolNames.
func (c *compiler) collectToolNames(src *source, n *yaml.Node, field string, checked *cel.Ast) {
	native := checked.NativeRep()
	add := func(lit celast.Expr) {
		if lit.Kind() != celast.LiteralKind || lit.AsLiteral().Type() != types.StringType {
			return
		}
		loc := native.SourceInfo().GetStartLocation(lit.ID())
		line, col := c.exprPosition(src, n, runeOffset(n.Value, loc.Line(), loc.Column()))
		e := src.errorAt("", line, col, "")
		c.toolNames = append(c.toolNames, policy.ToolName{Name: lit.AsLiteral().Value().(string), Location: e.Location, Snippet: e.Snippet})
	}
	addList := func(x celast.Expr) {
		if x.Kind() == celast.ListKind {
			for _, el := range x.AsList().Elements() {
				add(el)
			}
		}
	}
	if field == "activeTools" {
		addList(native.Expr())
	}
	celast.PreOrderVisit(native.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() == celast.MapKind { // {"type": "tool", "toolName": "x"}, a toolChoice or stopWhen
			for _, en := range x.AsMap().Entries() {
				e := en.AsMapEntry()
				if k := e.Key(); k.Kind() == celast.LiteralKind && k.AsLiteral().Value() == "toolName" {
					add(e.Value())
				}
			}
			return
		}
		if x.Kind() != celast.CallKind || len(x.AsCall().Args()) != 2 {
			return
		}
		a, b := x.AsCall().Args()[0], x.AsCall().Args()[1]
		switch x.AsCall().FunctionName() {
		case operators.Equals, operators.NotEquals:
			if namesTool(a) {
				add(b)
			} else if namesTool(b) {
				add(a)
			}
		case operators.In:
			if namesTool(a) {
				addList(b)
			}
		}
	}))
}

// namesTool reports whether x selects a tool-name field (t.name, c.toolName).
func namesTool(x celast.Expr) bool {
	return x.Kind() == celast.SelectKind && toolNameFields[x.AsSelect().FieldName()]
}
