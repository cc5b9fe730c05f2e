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
	"regexp"
	"strconv"

	goccy "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// v3Line matches yaml.v3's syntax error text.
var v3Line = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// SyntaxError is a located YAML syntax error.
type SyntaxError struct {
	// Line and Column are 1-based; Column is 0 when unknown.
	Line, Column int
	// Message is yaml.v3's description, without its "yaml: line N:" prefix.
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
	return e, true
}
