package opa

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// parseJSONTerm converts JSON that json.Valid accepted to a term, the value
// decodeJSON plus ast.InterfaceToValue would give, without the Go values in
// between: tool inputs and outputs are converted on every decision. It
// returns ok false for what it leaves to that slower path (an object with a
// duplicate key, where encoding/json keeps the last value).
//
// Strings and numbers are substrings of one copy of raw; a string with an
// escape or non-ASCII bytes is decoded by encoding/json, so invalid UTF-8
// becomes U+FFFD as it would there.
func parseJSONTerm(raw []byte) (t *ast.Term, ok bool, err error) {
	p := jsonParser{s: string(raw)}
	return p.value()
}

// jsonParser reads one valid JSON text; it does not check syntax again.
type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (*ast.Term, bool, error) {
	p.space()
	switch p.s[p.i] {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return ast.StringTerm(p.str()), true, nil
	case 't':
		p.i += len("true")
		return ast.InternedTerm(true), true, nil
	case 'f':
		p.i += len("false")
		return ast.InternedTerm(false), true, nil
	case 'n':
		p.i += len("null")
		return ast.NullTerm(), true, nil
	}
	num := p.number()
	if t := ast.InternedIntNumberTermFromString(num); t != nil {
		return t, true, nil
	}
	n, err := ast.NumberChecked(num)
	if err != nil {
		return nil, true, err
	}
	return ast.NewTerm(n), true, nil
}

// number reads a number literal at p.i.
func (p *jsonParser) number() string {
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// scanKeys is how many keys object compares a new key with one by one
// before it keeps them in a map.
const scanKeys = 16

func (p *jsonParser) object() (*ast.Term, bool, error) {
	p.i++ // {
	p.space()
	if p.s[p.i] == '}' {
		p.i++
		return ast.ObjectTerm(), true, nil
	}
	var (
		items [][2]*ast.Term
		// seen holds the keys once the object has more than scanKeys of
		// them, so a model's input with many keys costs linear time.
		seen map[string]struct{}
	)
	for {
		p.space()
		k := p.str()
		if seen == nil {
			for _, it := range items {
				if string(it[0].Value.(ast.String)) == k {
					return nil, false, nil
				}
			}
			if len(items) == scanKeys {
				seen = make(map[string]struct{}, 4*scanKeys)
				for _, it := range items {
					seen[string(it[0].Value.(ast.String))] = struct{}{}
				}
			}
		}
		if seen != nil {
			if _, dup := seen[k]; dup {
				return nil, false, nil
			}
			seen[k] = struct{}{}
		}
		p.space()
		p.i++ // :
		v, ok, err := p.value()
		if !ok || err != nil {
			return nil, ok, err
		}
		items = append(items, ast.Item(ast.StringTerm(k), v))
		p.space()
		c := p.s[p.i]
		p.i++ // , or }
		if c == '}' {
			return ast.ObjectTerm(items...), true, nil
		}
	}
}

func (p *jsonParser) array() (*ast.Term, bool, error) {
	p.i++ // [
	p.space()
	if p.s[p.i] == ']' {
		p.i++
		return ast.ArrayTerm(), true, nil
	}
	var elems []*ast.Term
	for {
		v, ok, err := p.value()
		if !ok || err != nil {
			return nil, ok, err
		}
		elems = append(elems, v)
		p.space()
		c := p.s[p.i]
		p.i++ // , or ]
		if c == ']' {
			return ast.ArrayTerm(elems...), true, nil
		}
	}
}

// str reads a string literal at p.i and returns its value.
func (p *jsonParser) str() string {
	start := p.i
	p.i++ // "
	escaped, ascii := false, true
	for p.s[p.i] != '"' {
		switch c := p.s[p.i]; {
		case c == '\\':
			escaped = true
			p.i++ // the escaped byte cannot end the literal
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	p.i++ // "
	lit := p.s[start:p.i]
	if !escaped && (ascii || utf8.ValidString(lit)) {
		return lit[1 : len(lit)-1]
	}
	var s string
	_ = json.Unmarshal([]byte(lit), &s) // lit is a valid string literal
	return s
}
