package celrules

import (
	"bytes"
	"sort"
	"strconv"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/internal/yamlpos"
	"github.com/turngate/turngate/policy"
)

// source is one rule file's text with a line index, so diagnostics can
// quote the offending line.
type source struct {
	path       string
	data       []byte
	lineStarts []int // byte offset of each line's first byte
}

func newSource(f policy.File) *source {
	s := &source{path: f.Path, data: f.Data, lineStarts: []int{0}}
	for i, b := range f.Data {
		if b == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	return s
}

// line returns the text of the 1-based line n without its line break.
func (s *source) line(n int) string {
	if n < 1 || n > len(s.lineStarts) {
		return ""
	}
	start := s.lineStarts[n-1]
	end := len(s.data)
	if n < len(s.lineStarts) {
		end = s.lineStarts[n] - 1
	}
	return string(bytes.TrimRight(s.data[start:end], "\r"))
}

// offset returns the byte offset of a 1-based line and 1-based rune column.
func (s *source) offset(line, col int) int {
	if line < 1 || line > len(s.lineStarts) {
		return len(s.data)
	}
	off := s.lineStarts[line-1]
	for c := 1; c < col && off < len(s.data) && s.data[off] != '\n'; c++ {
		_, size := utf8.DecodeRune(s.data[off:])
		off += size
	}
	return off
}

// position returns the 1-based line and rune column of a byte offset.
func (s *source) position(off int) (line, col int) {
	line = sort.Search(len(s.lineStarts), func(i int) bool { return s.lineStarts[i] > off })
	start := s.lineStarts[line-1]
	if off > len(s.data) {
		off = len(s.data)
	}
	return line, utf8.RuneCount(s.data[start:off]) + 1
}

// errorAt builds a positioned diagnostic with the source line and a caret.
func (s *source) errorAt(code string, line, col int, msg string) *policy.Error {
	e := &policy.Error{
		Code:     code,
		Location: policy.Location{File: s.path, Line: line, Column: col},
		Message:  msg,
	}
	if line > 0 {
		e.Snippet = policy.Snippet(s.line(line), col)
	}
	return e
}

// nodeError is errorAt at a YAML node.
func (s *source) nodeError(code string, n *yaml.Node, msg string) *policy.Error {
	return s.errorAt(code, n.Line, n.Column, msg)
}

// parseError turns a yaml.v3 syntax error into a diagnostic at the
// problem's line and column (yamlpos; yaml.v3 alone names the line where
// the enclosing block began, without a column).
func (s *source) parseError(err error) *policy.Error {
	if e, ok := yamlpos.Locate(s.data, err); ok {
		return s.errorAt(policy.CodeParse, e.Line, e.Column, "invalid YAML: "+e.Message)
	}
	return s.errorAt(policy.CodeParse, 0, 0, "invalid YAML: "+err.Error())
}

// scalarPositions maps every rune of a scalar node's decoded value back to
// its byte offset in the file. It replays the value against the raw text:
// characters that match advance both, and characters the scalar's style
// removes (indentation, quotes, folded line breaks, escape sequences) are
// skipped. This handles plain, single-quoted, double-quoted, literal and
// folded scalars, so a CEL error inside any of them points at the right
// file column.
func (s *source) scalarPositions(n *yaml.Node) []int {
	value := []rune(n.Value)
	out := make([]int, len(value)+1)
	j := s.offset(n.Line, n.Column)
	switch n.Style {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		// Content starts on the line after the block header ("|", ">-", …).
		if nl := bytes.IndexByte(s.data[j:], '\n'); nl >= 0 {
			j += nl + 1
		}
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		j++ // the opening quote
	}
	literal := n.Style == yaml.LiteralStyle
	double := n.Style == yaml.DoubleQuotedStyle
	for i, r := range value {
		for j < len(s.data) {
			c, size := utf8.DecodeRune(s.data[j:])
			if double && c == '\\' {
				produced, length := decodeEscape(s.data[j:])
				if produced == r {
					out[i] = j
					j += length
					goto next
				}
				j += length
				continue
			}
			if c == r || (!literal && c == '\n' && (r == ' ' || r == '\n')) {
				out[i] = j
				j += size
				goto next
			}
			j += size
		}
		out[i] = j
	next:
	}
	out[len(value)] = j
	return out
}

// decodeEscape decodes one double-quoted YAML escape sequence at the start
// of b, returning the rune it produces (-1 for an escaped line break, which
// produces nothing) and its length in bytes.
func decodeEscape(b []byte) (rune, int) {
	if len(b) < 2 {
		return -1, len(b)
	}
	hex := func(n int) (rune, int) {
		if len(b) < 2+n {
			return -1, len(b)
		}
		v, err := strconv.ParseUint(string(b[2:2+n]), 16, 32)
		if err != nil {
			return -1, 2
		}
		return rune(v), 2 + n
	}
	switch b[1] {
	case 'x':
		return hex(2)
	case 'u':
		return hex(4)
	case 'U':
		return hex(8)
	case '\n':
		return -1, 2
	case '\r':
		if len(b) > 2 && b[2] == '\n' {
			return -1, 3
		}
		return -1, 2
	}
	if r, ok := yamlEscapes[b[1]]; ok {
		return r, 2
	}
	return rune(b[1]), 2
}

// yamlEscapes are YAML 1.2's single-character escapes.
var yamlEscapes = map[byte]rune{
	'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f',
	'r': '\r', 'e': 0x1b, ' ': ' ', '"': '"', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0,
	'L': 0x2028, 'P': 0x2029,
}
