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

// withLines prefixes each error of err with "line N: " when its field path
// can be found in the document data. Only a failed Parse pays for this
// second, positioned parse.
func withLines(data []byte, err error) error {
	root := new(yaml.Node)
	_ = yaml.Unmarshal(data, root) // data decoded once already; only positions are needed
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
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
