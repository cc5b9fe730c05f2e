package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// posError is an error about what is at a line and column of the config
// file; every error Parse returns is one, rendered "line N col M: …".
type posError struct {
	line, col int
	err       error
}

func (e *posError) Error() string { return fmt.Sprintf("line %d col %d: %v", e.line, e.col, e.err) }
func (e *posError) Unwrap() error { return e.err }

// at returns an error positioned at node n.
func at(n *yaml.Node, format string, args ...any) *posError {
	return &posError{line: n.Line, col: n.Column, err: fmt.Errorf(format, args...)}
}

// fieldError is an error about the value at a field path such as
// "extensions[0].hooks[1]": withLines positions it at the line and column
// of that value (or of the nearest enclosing node the document has, for a
// missing key). Its message names the field in its own words.
type fieldError struct {
	path string
	// key positions the error at the mapping key that ends path rather
	// than at its value: the key itself is wrong.
	key bool
	err error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// atField returns an error about the value at path, positioned by withLines.
func atField(path, format string, args ...any) error {
	return &fieldError{path: path, err: fmt.Errorf(format, args...)}
}

// atKey returns an error about the mapping key that ends path (a header
// name that is not one), positioned by withLines.
func atKey(path, format string, args ...any) error {
	return &fieldError{path: path, key: true, err: fmt.Errorf(format, args...)}
}

// plainKey is a mapping key a field path writes after a dot.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// keyPath returns path extended by the mapping key k: "path.k", or
// `path["k"]` when k is not a plain word (a model alias with a dot, a
// header name with a space), so that locate finds it.
func keyPath(path, k string) string {
	if !plainKey.MatchString(k) {
		return path + "[" + strconv.Quote(k) + "]"
	}
	return joinPath(path, k)
}

// segment is one step of a field path: an index, a quoted key or a key.
var segment = regexp.MustCompile(`\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]|\.?([^.\[\]]+)`)

// withLines positions each error of err: a fieldError at the node its
// path leads to, any other at the document's start (Validate's errors are
// all fieldErrors; this keeps a position on every error regardless). Only
// a failed Parse pays for this second, positioned parse.
func withLines(data []byte, err error) []*posError {
	root := new(yaml.Node)
	_ = yaml.Unmarshal(data, root) // data decoded once already; only positions are needed
	var out []*posError
	for _, e := range Flatten(err) {
		var fe *fieldError
		n := (*yaml.Node)(nil)
		if errors.As(e, &fe) {
			n = locate(root, fe.path, fe.key)
		}
		if n == nil {
			n = documentStart(root)
		}
		out = append(out, &posError{line: n.Line, col: n.Column, err: e})
	}
	return out
}

// documentStart is the node where the document's content starts, or line
// 1 column 1 for an empty document.
func documentStart(root *yaml.Node) *yaml.Node {
	if root != nil && len(root.Content) > 0 && root.Content[0].Line > 0 {
		return root.Content[0]
	}
	return &yaml.Node{Line: 1, Column: 1}
}

// locate returns the node at path in the document root (with key, the
// mapping key that ends path), the nearest enclosing node when the path
// leads to a key the document lacks, or nil for an empty document.
func locate(root *yaml.Node, path string, key bool) *yaml.Node {
	if path == "" || root == nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	n, keyNode := root.Content[0], (*yaml.Node)(nil)
	for _, m := range segment.FindAllStringSubmatch(path, -1) {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias // descend into what the alias stands for
		}
		name := m[3]
		if m[2] != "" {
			name, _ = strconv.Unquote(m[2])
		}
		keyNode = nil
		switch {
		case m[1] != "" && n.Kind == yaml.SequenceNode:
			i, _ := strconv.Atoi(m[1])
			if i >= len(n.Content) {
				return n
			}
			n = n.Content[i]
		case m[1] == "" && n.Kind == yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == name {
					keyNode, next = n.Content[i], n.Content[i+1]
				}
			}
			if next == nil {
				return n
			}
			n = next
		default:
			return n
		}
	}
	if key && keyNode != nil {
		return keyNode
	}
	return n
}

// Flatten returns the errors joined in err (errors.Join, nested or not),
// or err alone.
func Flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Flatten(e)...)
	}
	return out
}

// inFile renders a report: errs in position order (those at one position
// in the order they were found, each once), at most policy.MaxErrors of them and then
// how many more there are from where the first one not shown is, each
// reading "file: line N col M: …" (the further lines of a message of
// several indented under it).
func inFile(name string, errs []*posError) error {
	slices.SortStableFunc(errs, func(a, b *posError) int {
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col))
	})
	// The decoder reports a value aliased several times once per alias.
	errs = slices.CompactFunc(errs, func(a, b *posError) bool { return a.Error() == b.Error() })
	if len(errs) > policy.MaxErrors {
		rest := errs[policy.MaxErrors]
		errs = append(errs[:policy.MaxErrors], &posError{line: rest.line, col: rest.col,
			err: fmt.Errorf("%d more errors from here on (the first %d are shown)", len(errs)-policy.MaxErrors, policy.MaxErrors)})
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = &FileError{File: name, Line: e.line, Column: e.col, Err: e.err}
	}
	return errors.Join(out...)
}

// FileError is one error of a config file, at a line and column: every
// error Load and Parse return is a FileError or several joined
// (errors.Join), and so is what ErrorAt returns. The live configuration
// reports them with their positions.
type FileError struct {
	File         string
	Line, Column int
	Err          error
}

// Error renders e "file: line N col M: message", the further lines of a
// message of several indented under it.
func (e *FileError) Error() string {
	return fmt.Sprintf("%s: line %d col %d: %s", e.File, e.Line, e.Column, strings.ReplaceAll(e.Err.Error(), "\n", "\n    "))
}

func (e *FileError) Unwrap() error { return e.Err }
