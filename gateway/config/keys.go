package config

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/internal/yamlpos"
)

// unknownKeys walks the document root alongside the Config type and reports
// every mapping key that names no field, with its line and column, its
// field path ("agents[0]") and the closest known key when one is near. The
// strict decoder would report the same keys in Go terms ("field maxStep
// not found in type config.Agent"); users read YAML, not Go.
func unknownKeys(root *yaml.Node) error {
	if root == nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	var errs []error
	walkKeys(root.Content[0], reflect.TypeFor[Config](), "", &errs)
	return errors.Join(errs...)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// walkKeys checks n against t, appending an error per unknown key.
func walkKeys(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return // decoded by its own rules
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode || t == reflect.TypeFor[time.Time]() {
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("unknown key %q", k.Value)
				if s := suggest(k.Value, fields); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				where := path
				if where == "" {
					where = "top level"
				}
				*errs = append(*errs, fmt.Errorf("line %d col %d: %s: %s", k.Line, k.Column, where, msg))
				continue
			}
			walkKeys(v, ft, joinPath(path, k.Value), errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, e := range n.Content {
			walkKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), errs)
		}
	}
}

// yamlFields maps the YAML keys of struct t (inline fields flattened) to
// their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
		case strings.Contains(opts, "inline"):
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
		case name == "":
			out[strings.ToLower(f.Name)] = f.Type // yaml.v3's default key
		default:
			out[name] = f.Type
		}
	}
	return out
}

// suggest returns the known key closest to key, or "" when none is close:
// at most two letters, or a third of them, differ, ignoring case.
func suggest(key string, known map[string]reflect.Type) string {
	best, bestD := "", max(2, len(key)/3)+1
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	slices.Sort(names) // ties go to the first name alphabetically
	for _, k := range names {
		if d := levenshtein.ComputeDistance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// typeMismatch matches one of yaml.v3's type errors: "line 2: cannot
// unmarshal !!str `many` into int".
var typeMismatch = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")

// friendlyTypeErrors rewrites the decoder's type errors in YAML terms:
// the field path and what the key takes, instead of a Go type.
func friendlyTypeErrors(root *yaml.Node, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	out := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		m := typeMismatch.FindStringSubmatch(e)
		if m == nil {
			out = append(out, errors.New(e))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		where, col := "", 0
		if root != nil && len(root.Content) > 0 {
			where, col = pathAt(root.Content[0], "", line, m[3])
		}
		msg := fmt.Sprintf("%s must be %s, not %q", cmp.Or(where, "value"), goTypeWord(m[4]), m[3])
		if col > 0 {
			out = append(out, fmt.Errorf("line %d col %d: %s", line, col, msg))
		} else {
			out = append(out, fmt.Errorf("line %d: %s", line, msg))
		}
	}
	return errors.Join(out...)
}

// pathAt returns the field path and column of the scalar on line whose
// value is value.
func pathAt(n *yaml.Node, path string, line int, value string) (string, int) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Line == line && n.Value == value {
			return path, n.Column
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if p, c := pathAt(n.Content[i+1], joinPath(path, n.Content[i].Value), line, value); p != "" {
				return p, c
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			if p, c := pathAt(e, fmt.Sprintf("%s[%d]", path, i), line, value); p != "" {
				return p, c
			}
		}
	}
	return "", 0
}

// goTypeWord names what a Go type takes, in YAML terms.
func goTypeWord(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 30s or 1m30s"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "a mapping"
}

// syntaxError reports a YAML syntax error at the problem's line and column
// (yamlpos), in the form of the other errors.
func syntaxError(data []byte, err error) error {
	e, ok := yamlpos.Locate(data, err)
	switch {
	case !ok:
		return err
	case e.Column > 0:
		return fmt.Errorf("line %d col %d: invalid YAML: %s", e.Line, e.Column, e.Message)
	}
	return fmt.Errorf("line %d: invalid YAML: %s", e.Line, e.Message)
}
