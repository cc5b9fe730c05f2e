package celrules

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/turngate/turngate/internal/suggest"
	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// stateVariable is the CEL variable holding the declared state the rules
// read (policy/state), as Rego's input.state: state.NAME.
const stateVariable = "state"

// checkState reports every state.NAME (and state["NAME"]) of the checked
// expression n whose NAME no declaration declares, with a "did you mean",
// and records the names the hook's rules read: a use of state other than
// a named field reads every declared state.
func (c *compiler) checkState(src *source, spec *ruleSpec, field string, n *yaml.Node, checked *cel.Ast) {
	native := checked.NativeRep()
	reads := c.stateReads[spec.hook]
	if reads == nil {
		reads = map[string]bool{}
		c.stateReads[spec.hook] = reads
	}
	named := map[int64]bool{} // the state idents read as state.NAME
	// read notes state.NAME at the expression id; skip is how far NAME
	// starts after the id's position (the dot of a selection).
	read := func(name string, id int64, skip int) {
		if slices.Contains(c.opts.StateNames, name) {
			reads[name] = true
			return
		}
		loc := native.SourceInfo().GetStartLocation(id)
		line, col := c.exprPosition(src, n, runeOffset(n.Value, loc.Line(), loc.Column())+skip)
		c.add(src.errorAt(policy.CodeType, line, col, fmt.Sprintf("undefined state %s.%s%s", stateVariable, name, stateSuggestion(name, c.opts.StateNames))), spec.name, field)
	}
	celast.PreOrderVisit(native.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		switch x.Kind() {
		case celast.SelectKind:
			if op := x.AsSelect().Operand(); isStateIdent(op) {
				named[op.ID()] = true
				read(x.AsSelect().FieldName(), x.ID(), 1)
			}
		case celast.CallKind:
			call := x.AsCall()
			if call.FunctionName() == operators.Index && len(call.Args()) == 2 && isStateIdent(call.Args()[0]) {
				if k := call.Args()[1]; k.Kind() == celast.LiteralKind && k.AsLiteral().Type() == types.StringType {
					named[call.Args()[0].ID()] = true
					read(k.AsLiteral().Value().(string), k.ID(), 0)
				}
			}
			// "NAME" in state: a misspelt NAME is never in it.
			if call.FunctionName() == operators.In && len(call.Args()) == 2 && isStateIdent(call.Args()[1]) {
				if k := call.Args()[0]; k.Kind() == celast.LiteralKind && k.AsLiteral().Type() == types.StringType {
					named[call.Args()[1].ID()] = true
					read(k.AsLiteral().Value().(string), k.ID(), 0)
				}
			}
		}
	}))
	celast.PreOrderVisit(native.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if isStateIdent(x) && !named[x.ID()] {
			for _, name := range c.opts.StateNames {
				reads[name] = true
			}
		}
	}))
}

func isStateIdent(x celast.Expr) bool {
	return x.Kind() == celast.IdentKind && x.AsIdent() == stateVariable
}

// stateSuggestion is "; did you mean state.X?" for a declared name close
// to name, else the declared names.
func stateSuggestion(name string, declared []string) string {
	if best := suggest.Closest(name, declared); best != "" {
		return fmt.Sprintf("; did you mean %s.%s?", stateVariable, best)
	}
	if len(declared) == 0 {
		return " (the rules declare no state: state.yaml, *.state.yaml)"
	}
	return fmt.Sprintf(" (declared: %s)", strings.Join(declared, ", "))
}

// StateReads returns the names of the declared states the rules of hook
// (beforeTurn, beforeStep) read, sorted.
func (s *Set) StateReads(hook string) []string {
	if s == nil {
		return nil
	}
	return s.stateReads[hook]
}

// sortedReads turns the compiler's reads into Set.stateReads.
func sortedReads(reads map[string]map[string]bool) map[string][]string {
	out := map[string][]string{}
	for hook, names := range reads {
		if len(names) > 0 {
			out[hook] = slices.Sorted(maps.Keys(names))
		}
	}
	return out
}

// stateValue is the state variable's value: the declared values, numbers
// as int or double. Without state it is an empty map, so reading a name
// fails the evaluation (fail closed) rather than guessing.
func stateValue(vals map[string]any) ref.Val {
	if len(vals) == 0 {
		return emptyState
	}
	m := make(map[string]any, len(vals))
	for k, v := range vals {
		m[k] = nativeState(v)
	}
	return types.NewStringInterfaceMap(registry, m)
}

var emptyState = types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{})

// nativeState converts one decoded state value for CEL: json.Number to
// int64 when it is whole, else float64; objects member by member.
func nativeState(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = nativeState(e)
		}
		return m
	}
	return v
}
