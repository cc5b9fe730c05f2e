package opa

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/internal/jsonstr"
)

// A document is the decoded JSON a patch or a redaction changes: *object,
// []any, string, json.Number (numbers kept exact), bool or nil. Objects keep
// their members in document order, so a patched tool input reads as the
// model wrote it, with added members at the end.

// object is a decoded JSON object. Lookups scan the keys: tool inputs and
// outputs have few members per object, and a patch looks up a handful.
type object struct {
	keys []string
	vals []any
}

func (o *object) find(k string) int {
	return slices.Index(o.keys, k)
}

// set replaces member k's value, or adds k at the end.
func (o *object) set(k string, v any) {
	if i := o.find(k); i >= 0 {
		o.vals[i] = v
		return
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

// decodeDoc decodes raw JSON (empty raw means empty) into a document.
func decodeDoc(raw []byte, empty string) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte(empty)
	}
	if !json.Valid(raw) {
		_, err := decodeJSON(raw, nil) // for encoding/json's description of the fault
		return nil, err
	}
	p := jsonParser{s: string(raw)}
	return p.doc(), nil
}

// doc reads one value of the valid JSON text as a document. A member
// repeated in an object keeps its first place and its last value, as
// encoding/json keeps the last.
func (p *jsonParser) doc() any {
	p.space()
	switch p.s[p.i] {
	case '{':
		p.i++
		o := &object{}
		p.space()
		if p.s[p.i] == '}' {
			p.i++
			return o
		}
		for {
			p.space()
			k := p.str()
			p.space()
			p.i++ // :
			o.set(k, p.doc())
			p.space()
			c := p.s[p.i]
			p.i++ // , or }
			if c == '}' {
				return o
			}
		}
	case '[':
		p.i++
		a := []any{}
		p.space()
		if p.s[p.i] == ']' {
			p.i++
			return a
		}
		for {
			a = append(a, p.doc())
			p.space()
			c := p.s[p.i]
			p.i++ // , or ]
			if c == ']' {
				return a
			}
		}
	case '"':
		return p.str()
	case 't':
		p.i += len("true")
		return true
	case 'f':
		p.i += len("false")
		return false
	case 'n':
		p.i += len("null")
		return nil
	}
	return json.Number(p.number())
}

// docFromAST converts a Rego value to a document the way ast.JSON converts
// it to Go values: sets become arrays, object keys that are not strings
// become their JSON text, and objects have their keys sorted.
func docFromAST(v ast.Value) (any, error) {
	switch v := v.(type) {
	case ast.String:
		return string(v), nil
	case ast.Number:
		return json.Number(v), nil
	case ast.Boolean:
		return bool(v), nil
	case ast.Null:
		return nil, nil
	case *ast.Array:
		a := make([]any, v.Len())
		for i := range a {
			x, err := docFromAST(v.Elem(i).Value)
			if err != nil {
				return nil, err
			}
			a[i] = x
		}
		return a, nil
	case ast.Set:
		a := make([]any, 0, v.Len())
		err := v.Iter(func(t *ast.Term) error {
			x, err := docFromAST(t.Value)
			a = append(a, x)
			return err
		})
		return a, err
	case ast.Object:
		o := &object{keys: make([]string, 0, v.Len()), vals: make([]any, 0, v.Len())}
		sorted := true
		err := v.Iter(func(k, t *ast.Term) error {
			key, ok := k.Value.(ast.String)
			if !ok {
				sorted = false
				text, err := marshalValue(k.Value)
				if err != nil {
					return err
				}
				key = ast.String(text)
			}
			x, err := docFromAST(t.Value)
			o.set(string(key), x)
			return err
		})
		if !sorted {
			sortMembers(o)
		}
		return o, err
	}
	_, err := ast.JSON(v) // for ast's description of what is not JSON
	return nil, err
}

// sortMembers sorts an object's members by key.
func sortMembers(o *object) {
	idx := make([]int, len(o.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(o.keys[a], o.keys[b]) })
	keys, vals := slices.Clone(o.keys), slices.Clone(o.vals)
	for i, j := range idx {
		o.keys[i], o.vals[i] = keys[j], vals[j]
	}
}

// appendAST appends the JSON text marshalValue gives for v to buf, without
// its conversions; ok is false (and buf unspecified) for an object with a
// key that is not a string, which it leaves to marshalValue.
func appendAST(buf []byte, v ast.Value) ([]byte, bool) {
	var ok bool
	switch v := v.(type) {
	case ast.String:
		return jsonstr.Append(buf, string(v)), true
	case ast.Number:
		return append(buf, v...), true
	case ast.Boolean:
		return encodeDoc(buf, bool(v)), true
	case ast.Null:
		return encodeDoc(buf, nil), true
	case *ast.Array:
		buf = append(buf, '[')
		for i := range v.Len() {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendAST(buf, v.Elem(i).Value); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case ast.Set:
		buf = append(buf, '[')
		for i, t := range v.Slice() {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendAST(buf, t.Value); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case ast.Object:
		buf = append(buf, '{')
		for i, k := range v.Keys() {
			key, isString := k.Value.(ast.String)
			if !isString {
				return buf, false
			}
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = jsonstr.Append(buf, string(key))
			buf = append(buf, ':')
			if buf, ok = appendAST(buf, v.Get(k).Value); !ok {
				return buf, false
			}
		}
		return append(buf, '}'), true
	}
	return buf, false
}

// encodeDoc appends v's JSON text to buf, as encoding/json would write it
// without HTML escaping.
func encodeDoc(buf []byte, v any) []byte {
	switch v := v.(type) {
	case *object:
		buf = append(buf, '{')
		for i, k := range v.keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = jsonstr.Append(buf, k)
			buf = append(buf, ':')
			buf = encodeDoc(buf, v.vals[i])
		}
		return append(buf, '}')
	case []any:
		buf = append(buf, '[')
		for i, x := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = encodeDoc(buf, x)
		}
		return append(buf, ']')
	case string:
		return jsonstr.Append(buf, v)
	case json.Number:
		return append(buf, v...)
	case bool:
		if v {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	}
	return append(buf, "null"...)
}
