package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// fieldPath matches the field path that starts every validation and
// expansion error: "agents[1]", "models.fast", "auth.apiKeys[0]"...
var fieldPath = regexp.MustCompile(`^[A-Za-z]+(?:\[\d+\]|\.[A-Za-z0-9_-]+)*`)

// segment is one step of a field path: a key or an index.
var segment = regexp.MustCompile(`\[(\d+)\]|\.?([A-Za-z0-9_-]+)`)

// fieldError is an error about the value at a field path such as
// "extensions[0].hooks[1]": withLines prefixes it with the line and column
// of that value (or of the nearest enclosing node the document has, for a
// missing key). Its message names the field in its own words.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// atField returns an error about the value at path, positioned by withLines.
func atField(path, format string, args ...any) error {
	return &fieldError{path: path, err: fmt.Errorf(format, args...)}
}

// withLines prefixes each error of err with "line N col M: " when it is a
// fieldError whose path the document data holds, else with "line N: "
// when the field path that starts its message can be found. Only a failed
// Parse pays for this second, positioned parse.
func withLines(data []byte, err error) error {
	root := new(yaml.Node)
	_ = yaml.Unmarshal(data, root) // data decoded once already; only positions are needed
	errs := flatten(err)
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		if fe := (*fieldError)(nil); errors.As(e, &fe) {
			if n := locate(root, fe.path); n != nil {
				out[i] = fmt.Errorf("line %d col %d: %w", n.Line, n.Column, e)
				continue
			}
		}
		if n := locate(root, fieldPath.FindString(e.Error())); n != nil {
			out[i] = fmt.Errorf("line %d: %w", n.Line, e)
		}
	}
	return errors.Join(out...)
}

// locate returns the node at path in the document root, or nil.
func locate(root *yaml.Node, path string) *yaml.Node {
	if path == "" || root == nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	n := root.Content[0]
	for _, m := range segment.FindAllStringSubmatch(path, -1) {
		switch {
		case m[1] != "" && n.Kind == yaml.SequenceNode:
			i, _ := strconv.Atoi(m[1])
			if i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		case m[2] != "" && n.Kind == yaml.MappingNode:
			var next *yaml.Node
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == m[2] {
					next = n.Content[k+1]
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
	return n
}

// flatten returns the errors joined in err (errors.Join, nested or not),
// or err alone.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// inFile prefixes each error of err with the config's name, so every line
// of a report reads "file: line N col M: …".
func inFile(name string, err error) error {
	errs := flatten(err)
	for i, e := range errs {
		errs[i] = fmt.Errorf("%s: %w", name, e)
	}
	return errors.Join(errs...)
}
