package opa

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// RFC 6902 (JSON Patch) over a document (see jsondoc.go), changed in
// place: a decision's patch decodes the document once, applies every op and
// encodes once, so an op costs its pointer walk and nothing else (no
// marshalling per op, no allocation unless an object grows, an array
// changes length or a pointer token holds an escape).
// Pointers follow RFC 6901 strictly: "~" must be followed by 0 or 1, an
// array index is 0 or a number without leading zeros, and "-" (past the
// last element) is only a place to add to.

// patchOp is one validated patch operation.
type patchOp struct {
	// text is the op as canonical JSON (keys sorted): ops apply in the
	// order of their texts, and RulesFired names an op by it.
	text       string
	op         string
	path, from string
	// value is the op's value member (add, replace, test) as a document.
	value any
}

// opFields lists each RFC 6902 op's required members besides op and path.
var opFields = map[string][]string{
	"add":     {"value"},
	"remove":  nil,
	"replace": {"value"},
	"move":    {"from"},
	"copy":    {"from"},
	"test":    {"value"},
}

// parseOp validates a patch rule member and returns it as an op. buf is
// scratch space for the op's text; parseOp returns it for reuse.
func parseOp(v ast.Value, buf []byte) (patchOp, []byte, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return patchOp{}, buf, fmt.Errorf("is %s, want an object {\"op\", \"path\", …}", ast.ValueName(v))
	}
	opMember := obj.Get(opTerm)
	if opMember == nil {
		return patchOp{}, buf, fmt.Errorf("has no \"op\"")
	}
	name, ok := opMember.Value.(ast.String)
	if !ok {
		return patchOp{}, buf, fmt.Errorf("\"op\" is not a string")
	}
	required, known := opFields[string(name)]
	if !known {
		return patchOp{}, buf, fmt.Errorf("unknown op %q (want add, remove, replace, move, copy or test)", string(name))
	}
	op := patchOp{op: string(name)}
	var err error
	if op.path, err = pointerMember(obj, "path", name); err != nil {
		return patchOp{}, buf, err
	}
	for _, f := range required {
		if f == "from" {
			if op.from, err = pointerMember(obj, f, name); err != nil {
				return patchOp{}, buf, err
			}
			continue
		}
		t := obj.Get(valueTerm)
		if t == nil {
			return patchOp{}, buf, fmt.Errorf("%s op has no %q", name, f)
		}
		if op.value, err = docFromAST(t.Value); err != nil {
			return patchOp{}, buf, fmt.Errorf("value: %v", err)
		}
	}
	if buf, ok = appendAST(buf[:0], obj); !ok {
		text, err := marshalValue(obj)
		if err != nil {
			return patchOp{}, buf, err
		}
		buf = append(buf[:0], text...)
	}
	op.text = string(buf)
	return op, buf, nil
}

// pointerMember returns member f of an op, which must be a JSON pointer.
func pointerMember(obj ast.Object, f string, op ast.String) (string, error) {
	t := obj.Get(nameTerm(f))
	if t == nil {
		return "", fmt.Errorf("%s op has no %q", op, f)
	}
	s, ok := t.Value.(ast.String)
	if !ok || (s != "" && !strings.HasPrefix(string(s), "/")) {
		return "", fmt.Errorf("%q is not a JSON pointer (it must be a string, empty or starting with /)", f)
	}
	return string(s), nil
}

// applyOps applies ops in order to doc, a decoded JSON document, and
// returns the result; doc's containers are changed in place.
func applyOps(doc any, ops []patchOp, pkg string) (any, error) {
	for _, op := range ops {
		var err error
		if doc, err = op.apply(doc); err != nil {
			return nil, validationError(pkg, rulePatch, "applying op %s: %v", op.text, err)
		}
	}
	return doc, nil
}

// apply applies one op to doc and returns the new document.
func (op *patchOp) apply(doc any) (any, error) {
	switch op.op {
	case "add":
		return addAt(doc, op.path, op.value)
	case "remove":
		doc, _, err := removeAt(doc, op.path)
		return doc, err
	case "replace":
		return replaceAt(doc, op.path, op.value)
	case "move":
		if op.from == op.path {
			_, err := valueAt(doc, op.from)
			return doc, err
		}
		if strings.HasPrefix(op.path, op.from+"/") || op.from == "" {
			return nil, fmt.Errorf("cannot move %q into its own child %q", op.from, op.path)
		}
		doc, v, err := removeAt(doc, op.from)
		if err != nil {
			return nil, err
		}
		return addAt(doc, op.path, v)
	case "copy":
		v, err := valueAt(doc, op.from)
		if err != nil {
			return nil, err
		}
		return addAt(doc, op.path, copyJSON(v))
	case "test":
		v, err := valueAt(doc, op.path)
		if err != nil {
			return nil, err
		}
		if !equalJSON(v, op.value) {
			return nil, errors.New("test failed: the value differs")
		}
		return doc, nil
	}
	return nil, fmt.Errorf("unknown op %q", op.op) // unreachable: parseOp checked it
}

// valueAt returns the value pointer p selects in doc.
func valueAt(doc any, p string) (any, error) {
	cur := doc
	for rest := p; rest != ""; {
		var tok string
		var err error
		if tok, rest, err = nextToken(rest); err != nil {
			return nil, err
		}
		if cur, err = child(cur, tok); err != nil {
			return nil, pointerError(p, err)
		}
	}
	return cur, nil
}

// addAt adds v at pointer p in doc (RFC 6902 add: an object member is set,
// an array element inserted) and returns the new document.
func addAt(doc any, p string, v any) (any, error) {
	if p == "" {
		return v, nil
	}
	return edit(doc, p, func(parent any, tok string) (any, error) {
		switch c := parent.(type) {
		case *object:
			c.set(tok, v)
			return nil, nil
		case []any:
			i := len(c)
			if tok != "-" {
				var err error
				if i, err = index(tok, len(c), true); err != nil {
					return nil, err
				}
			}
			c = append(c, nil)
			copy(c[i+1:], c[i:])
			c[i] = v
			return c, nil
		}
		return nil, fmt.Errorf("%s has no member %q", jsonKind(parent), tok)
	})
}

// replaceAt replaces the value at pointer p in doc, which must exist, with
// v and returns the new document.
func replaceAt(doc any, p string, v any) (any, error) {
	if p == "" {
		return v, nil
	}
	return edit(doc, p, func(parent any, tok string) (any, error) {
		switch c := parent.(type) {
		case *object:
			i := c.find(tok)
			if i < 0 {
				return nil, fmt.Errorf("no member %q", tok)
			}
			c.vals[i] = v
			return nil, nil
		case []any:
			i, err := index(tok, len(c), false)
			if err != nil {
				return nil, err
			}
			c[i] = v
			return nil, nil
		}
		return nil, fmt.Errorf("%s has no member %q", jsonKind(parent), tok)
	})
}

// removeAt removes the value at pointer p from doc and returns the new
// document and the removed value.
func removeAt(doc any, p string) (any, any, error) {
	if p == "" {
		return nil, nil, errors.New("cannot remove the whole document")
	}
	var removed any
	doc, err := edit(doc, p, func(parent any, tok string) (any, error) {
		switch c := parent.(type) {
		case *object:
			i := c.find(tok)
			if i < 0 {
				return nil, fmt.Errorf("no member %q", tok)
			}
			removed = c.vals[i]
			c.keys = slices.Delete(c.keys, i, i+1)
			c.vals = slices.Delete(c.vals, i, i+1)
			return nil, nil
		case []any:
			i, err := index(tok, len(c), false)
			if err != nil {
				return nil, err
			}
			removed = c[i]
			return append(c[:i], c[i+1:]...), nil
		}
		return nil, fmt.Errorf("%s has no member %q", jsonKind(parent), tok)
	})
	return doc, removed, err
}

// edit walks to the container holding pointer p's last token and lets
// change alter it. change returns nil when it changed the container in
// place, or the container's new value (an array that grew or shrank), which
// edit stores in the container's place. p is not empty.
func edit(doc any, p string, change func(parent any, tok string) (any, error)) (any, error) {
	var err error
	// holder and key locate the current container within its parent (nil
	// holder: the container is the document itself).
	var holder any
	var key string
	cur := doc
	rest := p
	for {
		var tok string
		if tok, rest, err = nextToken(rest); err != nil {
			return nil, err
		}
		if rest == "" {
			changed, err := change(cur, tok)
			if err != nil {
				return nil, pointerError(p, err)
			}
			if changed == nil {
				return doc, nil
			}
			if holder == nil {
				return changed, nil
			}
			return doc, store(holder, key, changed)
		}
		next, err := child(cur, tok)
		if err != nil {
			return nil, pointerError(p, err)
		}
		holder, key, cur = cur, tok, next
	}
}

// store sets member or element key of container to v.
func store(container any, key string, v any) error {
	switch c := container.(type) {
	case *object:
		c.vals[c.find(key)] = v
	case []any:
		i, err := index(key, len(c), false)
		if err != nil {
			return err
		}
		c[i] = v
	}
	return nil
}

// child returns member or element tok of v.
func child(v any, tok string) (any, error) {
	switch c := v.(type) {
	case *object:
		i := c.find(tok)
		if i < 0 {
			return nil, fmt.Errorf("no member %q", tok)
		}
		return c.vals[i], nil
	case []any:
		i, err := index(tok, len(c), false)
		if err != nil {
			return nil, err
		}
		return c[i], nil
	}
	return nil, fmt.Errorf("%s has no member %q", jsonKind(v), tok)
}

// index parses an array index token (RFC 6901: 0 or digits without a
// leading zero) and checks it names an element of an array of n elements,
// or with atEnd the place after the last one.
func index(tok string, n int, atEnd bool) (int, error) {
	if tok == "-" {
		return 0, errors.New(`index "-" (past the last element) only names a place to add to`)
	}
	if tok == "" || len(tok) > 1 && tok[0] == '0' || len(tok) > 9 {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	i := 0
	for _, c := range []byte(tok) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an array index", tok)
		}
		i = i*10 + int(c-'0')
	}
	if i > n || i == n && !atEnd {
		return 0, fmt.Errorf("index %d is out of range (the array has %d elements)", i, n)
	}
	return i, nil
}

// nextToken splits the first reference token off pointer p (which starts
// with "/") and unescapes it; rest is what follows it.
func nextToken(p string) (tok, rest string, err error) {
	p = p[1:]
	tok, rest = p, ""
	if i := strings.IndexByte(p, '/'); i >= 0 {
		tok, rest = p[:i], p[i:]
	}
	if strings.IndexByte(tok, '~') < 0 {
		return tok, rest, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '~' {
			b.WriteByte(tok[i])
			continue
		}
		if i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1') {
			return "", "", fmt.Errorf("%q is not a valid reference token (~ must be followed by 0 or 1)", tok)
		}
		b.WriteByte("~/"[tok[i+1]-'0'])
		i++
	}
	return b.String(), rest, nil
}

func pointerError(p string, err error) error {
	return fmt.Errorf("path %q: %w", p, err)
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// copyJSON returns a deep copy of a document's containers (for copy: the
// two places must not share an object or array).
func copyJSON(v any) any {
	switch c := v.(type) {
	case *object:
		o := &object{keys: slices.Clone(c.keys), vals: make([]any, len(c.vals))}
		for i, x := range c.vals {
			o.vals[i] = copyJSON(x)
		}
		return o
	case []any:
		a := make([]any, len(c))
		for i, x := range c {
			a[i] = copyJSON(x)
		}
		return a
	}
	return v
}

// SameJSON reports whether two JSON texts hold the same value by RFC 6902's
// test equality (object members in any order, numbers by value). Empty text
// is null; invalid text is never the same as anything.
func SameJSON(a, b []byte) bool {
	x, errA := decodeDoc(a, "null")
	y, errB := decodeDoc(b, "null")
	return errA == nil && errB == nil && equalJSON(x, y)
}

// equalJSON is RFC 6902's test equality: same type; numbers equal by
// value; strings by content; arrays element by element; objects with the
// same members, equal.
func equalJSON(x, y any) bool {
	switch a := x.(type) {
	case *object:
		b, ok := y.(*object)
		if !ok || len(a.keys) != len(b.keys) {
			return false
		}
		for i, k := range a.keys {
			j := b.find(k)
			if j < 0 || !equalJSON(a.vals[i], b.vals[j]) {
				return false
			}
		}
		return true
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := y.(json.Number)
		return ok && equalNumbers(string(a), string(b))
	}
	return x == y
}

// equalNumbers compares two JSON number literals by value.
func equalNumbers(a, b string) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	return okx && oky && x.Cmp(y) == 0
}

// redactAt replaces the value at pointer p in doc with Redacted and returns
// the new document; a pointer that selects nothing leaves doc as it is.
func redactAt(doc any, p string) any {
	if p == "" {
		return Redacted
	}
	if _, err := valueAt(doc, p); err != nil {
		return doc
	}
	doc, _ = replaceAt(doc, p, Redacted)
	return doc
}
