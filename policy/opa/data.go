package opa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// loadData parses the data files and merges each one's top-level object at
// the root of data, in path order. It records diagnostics in b.
func (b *build) loadData(files []policy.File) map[string]any {
	doc := map[string]any{}
	owners := map[string]string{} // data path ("a.b") → file that set it
	files = slices.Clone(files)
	slices.SortFunc(files, func(x, y policy.File) int { return strings.Compare(x.Path, y.Path) })
	for _, f := range files {
		b.src.add(f)
		obj, err := parseData(f)
		if err != nil {
			b.errs = append(b.errs, err)
			continue
		}
		b.merge(doc, obj, nil, f.Path, owners)
	}
	return doc
}

// parseData decodes one data file into a JSON-shaped object (numbers as
// json.Number).
func parseData(f policy.File) (map[string]any, *policy.Error) {
	var js []byte
	switch ext := strings.ToLower(path.Ext(f.Path)); ext {
	case ".json":
		js = f.Data
	case ".yaml", ".yml":
		var v any
		if err := yaml.Unmarshal(f.Data, &v); err != nil {
			return nil, dataError(f, yamlLine(err), 0, fmt.Sprintf("parsing YAML: %v", err))
		}
		var err error
		if js, err = json.Marshal(v); err != nil {
			return nil, dataError(f, 0, 0, fmt.Sprintf("converting YAML to JSON (keys must be strings): %v", err))
		}
	default:
		return nil, dataError(f, 0, 0, fmt.Sprintf("unsupported data file extension %q (want .json, .yaml or .yml)", ext))
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(f.Data, se.Offset)
			return nil, dataError(f, line, col, fmt.Sprintf("parsing JSON: %v", err))
		}
		return nil, dataError(f, 0, 0, fmt.Sprintf("parsing JSON: %v", err))
	}
	if dec.More() {
		line, col := lineCol(f.Data, dec.InputOffset())
		return nil, dataError(f, line, col, "parsing JSON: more than one value in the file")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, dataError(f, 0, 0, "a data file must hold an object at the top level")
	}
	return obj, nil
}

func dataError(f policy.File, line, col int, msg string) *policy.Error {
	e := &policy.Error{Code: policy.CodeParse, Location: policy.Location{File: f.Path, Line: line, Column: col}, Message: msg}
	if lines := strings.Split(string(f.Data), "\n"); line >= 1 && line <= len(lines) {
		e.Snippet = policy.Snippet(strings.TrimRight(lines[line-1], "\r"), col)
	}
	return e
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlLine extracts the line yaml.v3 names in its error text (it has no
// structured position).
func yamlLine(err error) int {
	m := yamlLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

// merge deep-merges src into dst. Objects merge key by key; any other value
// set twice is a conflict naming both files.
func (b *build) merge(dst, src map[string]any, at []string, file string, owners map[string]string) {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := append(slices.Clip(at), k)
		name := strings.Join(p, ".")
		sv := src[k]
		dv, exists := dst[k]
		if !exists {
			dst[k] = sv
			owners[name] = file
			continue
		}
		dm, dok := dv.(map[string]any)
		sm, sok := sv.(map[string]any)
		if dok && sok {
			// dst's object may be shared with an earlier file's parsed tree;
			// that tree is ours alone, so merging into it is safe.
			b.merge(dm, sm, p, file, owners)
			continue
		}
		b.errs = append(b.errs, &policy.Error{
			Code:     policy.CodeConflict,
			Location: policy.Location{File: file},
			Message:  fmt.Sprintf("data key %q is already set by %s", "data."+name, ownerOf(owners, p)),
		})
	}
}

// ownerOf names the file that set p or its nearest ancestor.
func ownerOf(owners map[string]string, p []string) string {
	for i := len(p); i > 0; i-- {
		if f, ok := owners[strings.Join(p[:i], ".")]; ok {
			return f
		}
	}
	return "another data file"
}

// dataAt reports whether doc holds a value at path (the compiler's check
// that no rule overlaps a data document).
func dataAt(doc map[string]any, path []string) bool {
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return true // a non-object value sits on the path
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}
