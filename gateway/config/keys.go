package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/internal/yamlpos"
)

// unknownKeys walks the document root alongside the Config type (visit)
// and reports every mapping key that names no field, with its line and
// column, its field path ("agents[0]") and the closest known key when one
// is near; a key of an anchor used twice once. The strict decoder would
// report the same keys in Go terms ("field maxStep not found in type
// config.Agent"); users read YAML, not Go.
func unknownKeys(root *yaml.Node) []*posError {
	if root == nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	var errs []*posError
	reported := map[*yaml.Node]bool{}
	visit(root.Content[0], reflect.TypeFor[Config](), "", func(n *yaml.Node, t reflect.Type, path string) bool {
		st := structOf(t)
		if st == nil || n.Kind != yaml.MappingNode {
			return false
		}
		fields := yamlFields(st)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if _, ok := fields[k.Value]; ok || reported[k] {
				continue
			}
			reported[k] = true
			msg := fmt.Sprintf("unknown key %q", k.Value)
			if s := suggest.Closest(k.Value, slices.Collect(maps.Keys(fields))); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, at(k, "%s: %s", cmp.Or(path, "top level"), msg))
		}
		return false
	})
	return errs
}

// aliasWalk is an anchor's node walked as a Go type.
type aliasWalk struct {
	n *yaml.Node
	t reflect.Type
}

// duplicateKeys reports every mapping key that repeats an earlier key of
// its mapping, at the repeat, and removes the repeats from the document so
// that the decoder takes the first: yaml.v3 would skip the whole mapping,
// and the errors of its other values with it.
func duplicateKeys(root *yaml.Node) []*posError {
	var errs []*posError
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.MappingNode:
			first := map[string]*yaml.Node{}
			kept := n.Content[:0:0]
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if f, ok := first[k.Value]; ok && k.Kind == yaml.ScalarNode {
					errs = append(errs, at(k, "%s: key %q is set twice (first at line %d)", cmp.Or(path, "top level"), k.Value, f.Line))
					continue
				}
				if k.Kind == yaml.ScalarNode {
					first[k.Value] = k
				}
				kept = append(kept, k, v)
				walk(v, keyPath(path, k.Value))
			}
			n.Content = kept
		}
	}
	walk(root, "")
	return errs
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decodesItself reports whether t has its own UnmarshalYAML: its keys are
// its own, not fields to check or walk.
func decodesItself(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// deref returns t without its pointers (nil for nil).
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// structOf returns the struct type t decodes as key by key, or nil (nil,
// not a struct, a time.Time, or a type with its own UnmarshalYAML).
func structOf(t reflect.Type) reflect.Type {
	t = deref(t)
	if t == nil || t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() || decodesItself(t) {
		return nil
	}
	return t
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

// Errors of yaml.v3's decoder: "line 2: cannot unmarshal !!str `many`
// into int" (a value longer than ten characters cut to seven and "..."),
// the "line N col M: …" of ToolChoice and the "line N: …" of other types'
// own decoding.
var (
	typeMismatch = regexp.MustCompile("(?s)^line (\\d+): cannot unmarshal (\\S+?)(?: `(.*)`)? into (\\S+)$")
	atLineCol    = regexp.MustCompile(`(?s)^line (\d+) col (\d+): (.*)$`)
	lineOnly     = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
)

// friendlyTypeErrors rewrites the decoder's errors in YAML terms, each at
// the line and column of the value or key it is about, with its field path
// and what the key takes instead of a Go type.
func friendlyTypeErrors(root *yaml.Node, err error) []*posError {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	doc := documentStart(root)
	var out []*posError
	for _, e := range msgs {
		switch m := (match{}); {
		case m.of(typeMismatch, e):
			line, want := m.line(), m[4]
			n, path := find(root, line, func(n *yaml.Node, t reflect.Type) bool {
				return t.String() == want && sameValue(n, m[2], m[3])
			})
			out = append(out, at(n, "%s must be %s, not %s", cmp.Or(path, "the config"), goTypeWord(want), describe(n, m[3])))
		case m.of(atLineCol, e):
			n, path := find(root, m.line(), func(n *yaml.Node, _ reflect.Type) bool { return n.Column == m.int(2) })
			out = append(out, at(n, "%s: %s", cmp.Or(path, "the config"), m[3]))
		case m.of(lineOnly, e):
			// An error of a type's own decoding (UnmarshalYAML), on the
			// line of the value that type decodes.
			n, path := find(root, m.line(), func(_ *yaml.Node, t reflect.Type) bool {
				return decodesItself(t)
			})
			out = append(out, at(n, "%s: %s", cmp.Or(path, "the config"), m[2]))
		default:
			out = append(out, at(doc, "%s", strings.TrimPrefix(e, "yaml: ")))
		}
	}
	return out
}

// match is a regexp's submatches.
type match []string

// of matches s against re, keeping the submatches.
func (m *match) of(re *regexp.Regexp, s string) bool {
	*m = re.FindStringSubmatch(s)
	return *m != nil
}

// int returns submatch i as a number.
func (m match) int(i int) int {
	v, _ := strconv.Atoi(m[i])
	return v
}

// line returns the line number every pattern starts with.
func (m match) line() int { return m.int(1) }

// sameValue reports whether n is what the decoder's type error describes:
// a mapping or list for !!map and !!seq, else a scalar whose value is value
// (or starts with it, for the decoder's "abcdefg..." of a long value).
func sameValue(n *yaml.Node, tag, value string) bool {
	switch tag {
	case "!!map":
		return n.Kind == yaml.MappingNode
	case "!!seq":
		return n.Kind == yaml.SequenceNode
	}
	if n.Kind != yaml.ScalarNode {
		return false
	}
	if short, ok := strings.CutSuffix(value, "..."); ok && len(n.Value) > 10 {
		return strings.HasPrefix(n.Value, short)
	}
	return n.Value == value
}

// describe names the value of n for an error: a mapping, a list, or the
// scalar quoted (cut at 40 bytes).
func describe(n *yaml.Node, value string) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		value = n.Value
	}
	if len(value) > 40 {
		return strconv.Quote(value[:37]) + "..."
	}
	return strconv.Quote(value)
}

// find returns the first node on line, in document order, that ok accepts
// given the Go type it decodes into, with its field path; else the first
// node on line; else a node at the line's first character (a value the
// document does not hold as a node).
func find(root *yaml.Node, line int, ok func(n *yaml.Node, t reflect.Type) bool) (*yaml.Node, string) {
	if root == nil || len(root.Content) == 0 {
		return &yaml.Node{Line: max(line, 1), Column: 1}, ""
	}
	var first *yaml.Node
	var firstPath string
	var found *yaml.Node
	var foundPath string
	visit(root.Content[0], reflect.TypeFor[Config](), "", func(n *yaml.Node, t reflect.Type, path string) bool {
		if n.Line != line {
			return false
		}
		if first == nil {
			first, firstPath = n, path
		}
		if t != nil && ok(n, t) {
			found, foundPath = n, path
			return true
		}
		return false
	})
	switch {
	case found != nil:
		return found, foundPath
	case first != nil:
		return first, firstPath
	}
	return &yaml.Node{Line: max(line, 1), Column: 1}, ""
}

// visit calls fn for n and every node under it in document order, with its
// field path and the Go type it decodes into (nil where no Config field
// takes it), until fn returns true. An alias is visited as what it stands
// for, each anchor once per type: an anchor that contains its own alias
// ends, and aliases of aliases (a "billion laughs") cost no more than
// their anchors.
func visit(n *yaml.Node, t reflect.Type, path string, fn func(n *yaml.Node, t reflect.Type, path string) bool) bool {
	walked := map[aliasWalk]bool{}
	var rec func(n *yaml.Node, t reflect.Type, path string) bool
	rec = func(n *yaml.Node, t reflect.Type, path string) bool {
		t = deref(t)
		if n.Kind == yaml.AliasNode {
			v := aliasWalk{n.Alias, t}
			if n.Alias == nil || walked[v] {
				return false
			}
			walked[v] = true
			n = n.Alias
		}
		if fn(n, t, path) {
			return true
		}
		custom := t != nil && decodesItself(t)
		switch n.Kind {
		case yaml.MappingNode:
			var fields map[string]reflect.Type
			if t != nil && !custom && t.Kind() == reflect.Struct {
				fields = yamlFields(t)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				var vt reflect.Type
				switch {
				case fields != nil:
					vt = fields[k.Value]
				case t != nil && !custom && t.Kind() == reflect.Map:
					vt = t.Elem()
				}
				if rec(v, vt, keyPath(path, k.Value)) {
					return true
				}
			}
		case yaml.SequenceNode:
			var et reflect.Type
			if t != nil && !custom && t.Kind() == reflect.Slice {
				et = t.Elem()
			}
			for i, e := range n.Content {
				if rec(e, et, fmt.Sprintf("%s[%d]", path, i)) {
					return true
				}
			}
		}
		return false
	}
	return rec(n, t, path)
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
// (yamlpos), in the form of the other errors. When yamlpos knows only the
// line, the column is that of the line's first character; an error
// yaml.v3 gives no line (a byte YAML does not allow, an alias of no
// anchor) is positioned at what it names.
func syntaxError(data []byte, err error) *posError {
	e, ok := yamlpos.Locate(data, err)
	if !ok {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line, col := errorOffset(data, msg)
		return &posError{line: line, col: col, err: fmt.Errorf("invalid YAML: %s", msg)}
	}
	if e.Column == 0 {
		e.Column = firstColumn(data, e.Line)
	}
	return &posError{line: e.Line, col: e.Column, err: fmt.Errorf("invalid YAML: %s", e.Message)}
}

// unknownAnchor matches yaml.v3's error for an alias of no anchor.
var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// errorOffset returns the line and column of what a syntax error without
// a line is about: the alias of an unknown anchor, else the first byte
// YAML does not allow (invalid UTF-8 or a control character), else the
// document's start.
func errorOffset(data []byte, msg string) (line, col int) {
	off := -1
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		off = bytes.Index(data, []byte("*"+m[1]))
	}
	for i := 0; off < 0 && i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if (r == utf8.RuneError && size == 1) || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			off = i
		}
		i += size
	}
	if off < 0 {
		return 1, 1
	}
	return lineCol(data, off)
}

// lineCol returns the 1-based line and column (in characters) of byte
// offset off in data.
func lineCol(data []byte, off int) (line, col int) {
	before := data[:off]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[start:]) + 1
}

// firstColumn returns the column of line's first character that is not a
// space, or 1.
func firstColumn(data []byte, line int) int {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return 1
	}
	text := lines[line-1]
	trimmed := bytes.TrimLeft(text, " \t")
	if len(trimmed) == 0 {
		return 1
	}
	return utf8.RuneCount(text[:len(text)-len(trimmed)]) + 1
}
