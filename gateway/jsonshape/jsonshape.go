// Package jsonshape checks a decoded JSON document against a declared
// shape — the JSON type of every known field, number ranges, unions and
// objects tagged by their "type" key — and names the first violation by
// its JSON path (messages[0].content[1].image_url) and the JSON type
// expected, never a Go type. Keys a shape does not declare are accepted,
// except in a Strict object, where they are errors with a did-you-mean;
// null is accepted for every value (an API's "not given").
//
// Documents are decoded with json.Decoder.UseNumber, so a number too
// large for a float64 is a range violation rather than a decoding error.
package jsonshape

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/turngate/turngate/internal/suggest"
)

// Error is a violation: Path is the value's JSON path ("" for the
// document), Message says what it must be and what it is.
type Error struct {
	Path, Message string
}

func (e *Error) Error() string { return e.Path + ": " + e.Message }

type kind int

const (
	kindAny kind = iota
	kindString
	kindNumber
	kindInteger
	kindBool
	kindObject
	kindArray
)

// Shape is what a JSON value must be. Build one with the functions below.
type Shape struct {
	kind kind
	// what replaces the kind's name in messages.
	what     string
	ranged   bool
	min, max float64
	// fields are an object's known keys; values, the shape of every value
	// of an object used as a map.
	fields map[string]*Shape
	values *Shape
	items  *Shape
	oneOf  []*Shape
	byType map[string]*Shape
	// strict refuses an object's keys that fields does not declare.
	strict bool
}

// String is a string.
func String() *Shape { return &Shape{kind: kindString} }

// Bool is true or false.
func Bool() *Shape { return &Shape{kind: kindBool} }

// Integer is a number without a fraction.
func Integer() *Shape { return &Shape{kind: kindInteger} }

// IntegerIn is an integer from min to max.
func IntegerIn(min, max float64) *Shape {
	return &Shape{kind: kindInteger, ranged: true, min: min, max: max}
}

// Number is a number from min to max.
func Number(min, max float64) *Shape {
	return &Shape{kind: kindNumber, ranged: true, min: min, max: max}
}

// Fields are the known keys of an object and their shapes.
type Fields = map[string]*Shape

// Object is an object whose keys in fields have those shapes (nil: any
// object); other keys are accepted.
func Object(fields Fields) *Shape { return &Shape{kind: kindObject, fields: fields} }

// Map is an object every value of which is values.
func Map(values *Shape) *Shape { return &Shape{kind: kindObject, values: values} }

// Array is an array of items.
func Array(items *Shape) *Shape { return &Shape{kind: kindArray, items: items} }

// OneOf is one of alts, told apart by their JSON kinds; what names the
// union in messages ("a string or an array of strings").
func OneOf(what string, alts ...*Shape) *Shape { return &Shape{what: what, oneOf: alts} }

// Tagged is an object whose "type" key, required, picks its shape among
// byType (each an Object); what names it in messages.
func Tagged(what string, byType Fields) *Shape {
	return &Shape{kind: kindObject, what: what, byType: byType}
}

// Named returns s with what as its name in messages ("1 (one choice)").
func (s *Shape) Named(what string) *Shape {
	c := *s
	c.what = what
	return &c
}

// Strict returns s, an Object or Tagged shape, refusing the keys it does
// not declare: a misspelt key is an error naming the closest declared one,
// never a value silently ignored.
func (s *Shape) Strict() *Shape {
	c := *s
	c.strict = true
	return &c
}

// Check returns the first violation of s by doc (decoded with UseNumber),
// or nil. Object keys are visited in sorted order, so a document always
// gets the same answer.
func (s *Shape) Check(doc any) *Error { return s.check(doc, "") }

func (s *Shape) check(v any, path string) *Error {
	if v == nil {
		return nil
	}
	if s.oneOf != nil {
		for _, alt := range s.oneOf {
			if alt.kind.matches(v) {
				return alt.check(v, path)
			}
		}
		return errorf(path, "expected %s, got JSON %s", s.what, Describe(v))
	}
	if !s.kind.matches(v) {
		return errorf(path, "expected %s, got JSON %s", s.name(), Describe(v))
	}
	switch v := v.(type) {
	case json.Number:
		if f := numberValue(v); s.ranged && (f < s.min || f > s.max) {
			if s.min == s.max {
				return errorf(path, "must be %s, not %s", s.name(), v)
			}
			return errorf(path, "must be between %s and %s, not %s", fmtNumber(s.min), fmtNumber(s.max), v)
		}
	case []any:
		for i, item := range v {
			if err := s.items.check(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		return s.checkObject(v, path)
	}
	return nil
}

func (s *Shape) checkObject(v map[string]any, path string) *Error {
	fields := s.fields
	if s.byType != nil {
		typ, ok := v["type"].(string)
		switch {
		case v["type"] == nil:
			return errorf(join(path, "type"), "is required: one of %s", s.typeNames())
		case !ok:
			return errorf(join(path, "type"), "expected a string (one of %s), got JSON %s", s.typeNames(), Describe(v["type"]))
		}
		sub, ok := s.byType[typ]
		if !ok {
			return errorf(join(path, "type"), "must be one of %s, not %q", s.typeNames(), typ)
		}
		fields = sub.fields
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub := fields[k]
		if sub == nil && s.strict && (s.byType == nil || k != "type") {
			return unknownKey(fields, k, path)
		}
		if sub == nil {
			sub = s.values
		}
		if sub == nil {
			continue
		}
		if err := sub.check(v[k], join(path, k)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Shape) typeNames() string {
	names := make([]string, 0, len(s.byType))
	for n := range s.byType {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (s *Shape) name() string {
	if s.what != "" {
		return s.what
	}
	switch s.kind {
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindInteger:
		return "an integer"
	case kindBool:
		return "true or false"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	}
	return "a JSON value"
}

// matches reports whether v is of kind k.
func (k kind) matches(v any) bool {
	switch v := v.(type) {
	case string:
		return k == kindString || k == kindAny
	case json.Number:
		f := numberValue(v)
		return k == kindNumber || k == kindAny || k == kindInteger && f == math.Trunc(f) && !math.IsInf(f, 0)
	case bool:
		return k == kindBool || k == kindAny
	case map[string]any:
		return k == kindObject || k == kindAny
	case []any:
		return k == kindArray || k == kindAny
	}
	return false
}

// Describe names a value for a message: its JSON type, followed by the
// value when it is a short scalar (string "hot", number 5, object).
func Describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) <= 32 {
			return "string " + strconv.Quote(v)
		}
		return "string"
	case json.Number:
		if len(v) <= 32 {
			return "number " + string(v)
		}
		return "number"
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "value"
}

// numberValue is n as a float64, ±Inf when it is too large for one.
func numberValue(n json.Number) float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// unknownKey is the error of key k, which fields does not declare.
func unknownKey(fields Fields, k, path string) *Error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	if guess := suggest.Closest(k, names); guess != "" {
		return errorf(join(path, k), "is not a known field; did you mean %q?", guess)
	}
	sort.Strings(names)
	return errorf(join(path, k), "is not a known field (known: %s)", strings.Join(names, ", "))
}

func fmtNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
