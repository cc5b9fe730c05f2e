// Package yamlpos finds where a YAML syntax error really is. yaml.v3
// reports a syntax error at the line where the enclosing block began (its
// "context"), not where the problem is, and never with a column: a bad
// indent on line 19 of a list that starts on line 7 is "line 7". Every
// turngate file is still decoded with yaml.v3; only its syntax errors are
// located again with a second parser, goccy/go-yaml, whose errors carry the
// problem's line and column.
package yamlpos

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	goccy "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// v3Line matches yaml.v3's syntax error text.
var v3Line = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// SyntaxError is a located YAML syntax error.
type SyntaxError struct {
	// Line and Column are 1-based; Column is 0 when unknown.
	Line, Column int
	// Message says what is wrong in plain words when the error is one of
	// the indentation mistakes explain knows, followed by yaml.v3's own
	// description in parentheses; otherwise it is yaml.v3's description,
	// without its "yaml: line N:" prefix.
	Message string
}

// Locate returns the position of err, a yaml.v3 syntax error for data. ok
// is false when err is not one (a decoding error, for one).
func Locate(data []byte, err error) (_ SyntaxError, ok bool) {
	m := v3Line.FindStringSubmatch(err.Error())
	if m == nil {
		return SyntaxError{}, false
	}
	line, _ := strconv.Atoi(m[1])
	e := SyntaxError{Line: line, Message: m[2]}
	// The problem is at or after the context yaml.v3 names; a second
	// parser that agrees there is an error there tells where.
	var se *goccy.SyntaxError
	if _, perr := parser.ParseBytes(data, 0); errors.As(perr, &se) && se.Token != nil && se.Token.Position != nil {
		if p := se.Token.Position; p.Line >= line {
			e.Line, e.Column = p.Line, p.Column
		}
	}
	explain(data, &e)
	return e, true
}

// yaml.v3's descriptions of the usual indentation mistakes.
const (
	v3MappingValues = "mapping values are not allowed in this context"
	v3ExpectedKey   = "did not find expected key"
	v3ExpectedDash  = "did not find expected '-' indicator"
)

// explain rewrites e's message in plain words when it is an indentation
// mistake, keeping yaml.v3's words after it, and gives it a column when it
// has none: the key's, or the stray ": "'s.
func explain(data []byte, e *SyntaxError) {
	lines := strings.Split(string(data), "\n")
	if e.Line < 1 || e.Line > len(lines) {
		return
	}
	text := strings.TrimRight(lines[e.Line-1], "\r")
	var plain string
	switch e.Message {
	case v3MappingValues:
		key, col, _, isKey := keyOf(text)
		above, aboveCol, aboveValue := keyAbove(lines, e.Line)
		if isKey && aboveValue != "" && col > aboveCol {
			plain = fmt.Sprintf("%q is indented deeper than %q on the line above (column %d, not %d), so YAML reads it as more of %q's value, where a key cannot start: indent it as far as the keys it belongs with",
				key, above, col, aboveCol, above)
			e.Column = col
			break
		}
		// A value on the line holds ": " itself: it is read as a key.
		if i := strings.Index(text, ": "); i >= 0 {
			if j := strings.Index(text[i+2:], ": "); j >= 0 {
				plain = `a value holds ": ", which YAML reads as the start of another key: quote the value`
				e.Column = i + 2 + j + 1
				break
			}
		}
		if e.Column == 0 {
			e.Column = len(text) - len(strings.TrimLeft(text, " ")) + 1
		}
	case v3ExpectedKey:
		plain = "this line's indentation lines up with no key of the block above it: indent it as far as the keys it belongs with"
	case v3ExpectedDash:
		plain = `this line's indentation lines up with neither the list's items nor their keys: an item starts with "- " under the list's other items, and its keys line up after the "- "`
	}
	if plain != "" {
		e.Message = plain + " (" + e.Message + ")"
	}
}

// keyOf returns the key a line starts (after any "- " item markers), its
// 1-based column and the value after it; ok is false when the line holds
// no "key:".
func keyOf(line string) (key string, col int, value string, ok bool) {
	rest := strings.TrimLeft(line, " ")
	for strings.HasPrefix(rest, "- ") {
		rest = strings.TrimLeft(rest[2:], " ")
	}
	key, value, ok = strings.Cut(rest, ":")
	if !ok || (value != "" && value[0] != ' ') {
		return "", 0, "", false
	}
	return strings.TrimSpace(key), len(line) - len(rest) + 1, strings.TrimSpace(value), true
}

// keyAbove returns keyOf the nearest line before line (1-based), skipping
// blank and comment lines; "" when that line holds no key.
func keyAbove(lines []string, line int) (key string, col int, value string) {
	for i := line - 2; i >= 0; i-- {
		t := strings.TrimRight(lines[i], "\r")
		if rest := strings.TrimSpace(t); rest == "" || strings.HasPrefix(rest, "#") {
			continue
		}
		key, col, value, _ = keyOf(t)
		return key, col, value
	}
	return "", 0, ""
}
