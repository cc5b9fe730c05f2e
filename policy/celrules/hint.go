package celrules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"

	"github.com/turngate/turngate/internal/suggest"
)

// undefinedField is cel-go's checker message for a field its object type
// does not have.
var undefinedField = regexp.MustCompile(`^undefined field '([^']+)'$`)

// fieldHint returns what to add to the checker error e of the parsed
// expression: for an undefined field (principal.tenat), the field meant
// ("did you mean principal.tenant?") or the fields the object has. The
// object is the type of the select's operand, found by checking the
// operand alone in env; when that fails (an operand that is a macro's
// variable, as m in turn.messages.exists(m, m.rol == "user")), the closest
// field of any object type is named instead.
func fieldHint(env *cel.Env, parsed *cel.Ast, e *cel.Error) string {
	m := undefinedField.FindStringSubmatch(e.Message)
	if m == nil || parsed == nil {
		return ""
	}
	name := m[1]
	operand, names := "", []string(nil)
	if text, ok := selectOperand(parsed, e.ExprID); ok {
		if checked, iss := env.Compile(text); iss.Err() == nil {
			if o := objectTypeNamed(checked.OutputType().TypeName()); o != nil {
				operand, names = text, o.names
			}
		}
	}
	if names == nil {
		for _, o := range objectTypes {
			names = append(names, o.names...)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	meant := suggest.Closest(name, names)
	switch {
	case meant != "" && operand != "":
		return fmt.Sprintf("; did you mean %s.%s?", operand, meant)
	case meant != "":
		return fmt.Sprintf("; did you mean %s?", meant)
	case operand != "":
		return fmt.Sprintf(" (%s has %s)", operand, strings.Join(names, ", "))
	}
	return ""
}

// selectOperand returns the source text of the operand of the select
// expression id of parsed.
func selectOperand(parsed *cel.Ast, id int64) (string, bool) {
	native := parsed.NativeRep()
	var operand celast.Expr
	celast.PreOrderVisit(native.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if x.ID() == id && x.Kind() == celast.SelectKind {
			operand = x.AsSelect().Operand()
		}
	}))
	if operand == nil {
		return "", false
	}
	text, err := parser.Unparse(operand, native.SourceInfo())
	return text, err == nil
}

// objectTypeNamed returns the object type of a CEL type name, or nil.
func objectTypeNamed(name string) *objectType {
	for _, o := range objectTypes {
		if o.typ.TypeName() == name {
			return o
		}
	}
	return nil
}
