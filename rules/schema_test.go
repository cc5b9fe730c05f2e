package rules

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
)

// TestInputTablesMatchSchemas parses the input tables of this guide and of
// policy/opa/INPUT.md and compares every field name and type with the
// schemas rules are type-checked against (`turngate schema`), so the
// documentation cannot drift from what a rule may read.
func TestInputTablesMatchSchemas(t *testing.T) {
	toolCall := mustSchema(t)(opa.InputSchema(opa.ToolCallPackage, opa.Options{}))
	toolResult := mustSchema(t)(opa.InputSchema(opa.ToolResultPackage, opa.Options{}))
	turn := mustSchema(t)(celrules.JSONSchema("turn"))
	step := mustSchema(t)(celrules.JSONSchema("step"))
	chatError := mustSchema(t)(celrules.JSONSchema("error"))
	tests := []struct {
		doc, marker string
		want        map[string]string // documented path → type
		// shared: only fields beside those of the tool_call input
		shared bool
	}{
		{"README.md", "### The input document", regoFields("input", toolCall), false},
		{"README.md", "## Rego: `toolResult`", regoFields("input", toolResult), true},
		{"README.md", "`turn` (`turngate.Turn`):", celFields(turn), false},
		{"README.md", "`step` (`turngate.Step`):", celFields(step), false},
		{"README.md", "`error` (`turngate.ChatError`):", celFields(chatError), false},
		{"../policy/opa/INPUT.md", "## `input` for `data.turngate.tool_call`", regoFields("input", toolCall), false},
		{"../policy/opa/INPUT.md", "## `input` for `data.turngate.tool_result`", regoFields("input", toolResult), true},
	}
	callFields := regoFields("input", toolCall)
	for _, tt := range tests {
		t.Run(filepath.Base(tt.doc)+" "+tt.marker, func(t *testing.T) {
			got := table(t, tt.doc, tt.marker)
			want := tt.want
			if tt.shared {
				// The tool_result tables list the fields the tool_call
				// input does not have (the prose names the shared ones).
				want = maps.Clone(want)
				for p, typ := range want {
					if callFields[p] == typ {
						delete(want, p)
					}
				}
			}
			for _, p := range slices.Sorted(maps.Keys(want)) {
				switch typ, ok := got[p]; {
				case !ok:
					t.Errorf("%s is in the schema but not in the table", p)
				case !sameType(typ, want[p]):
					t.Errorf("%s: the table says %q, the schema %q", p, typ, want[p])
				}
			}
			for _, p := range slices.Sorted(maps.Keys(got)) {
				if _, ok := want[p]; !ok {
					t.Errorf("%s is in the table but not in the schema", p)
				}
			}
		})
	}
}

// mustSchema unwraps a schema constructor's result.
func mustSchema(t *testing.T) func(map[string]any, error) map[string]any {
	return func(s map[string]any, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// table returns the rows (first cell without backticks → second cell) of
// the first table after the line starting with marker in file.
func table(t *testing.T, file, marker string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	in, found := false, false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case !found:
			found = strings.HasPrefix(line, marker)
		case strings.HasPrefix(line, "|"):
			in = true
			cells := strings.Split(strings.Trim(line, "|"), "|")
			name := strings.Trim(strings.TrimSpace(cells[0]), "`")
			if len(cells) < 2 || name == "path" || name == "field" || strings.HasPrefix(name, "---") {
				continue
			}
			rows[name] = strings.TrimSpace(cells[1])
		case in:
			return rows
		}
	}
	if !found {
		t.Fatalf("%s has no line starting with %q", file, marker)
	}
	return rows
}

// regoFields flattens a Rego input schema into the documented paths: an
// object with properties is described field by field, anything else is
// one row typed as the tables write Rego types.
func regoFields(prefix string, s map[string]any) map[string]string {
	out := map[string]string{}
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 || prefix == "input.body" {
		out[prefix] = regoType(s)
		return out
	}
	for name, p := range props {
		maps.Copy(out, regoFields(prefix+"."+name, p.(map[string]any)))
	}
	return out
}

func regoType(s map[string]any) string {
	switch typ := s["type"].(type) {
	case nil:
		return "any"
	case []any:
		names := make([]string, len(typ))
		for i, x := range typ {
			names[i] = regoType(map[string]any{"type": x})
		}
		return strings.Join(names, " or ")
	case string:
		switch typ {
		case "integer", "number":
			return "number"
		case "boolean":
			return "bool"
		case "array":
			if items, _ := s["items"].(map[string]any); items != nil && items["type"] == "string" {
				return "array of strings"
			}
		}
		return typ
	}
	return fmt.Sprint(s["type"])
}

// celFields lists a CEL object schema's fields typed as the tables write
// CEL types.
func celFields(s map[string]any) map[string]string {
	out := map[string]string{}
	for name, p := range s["properties"].(map[string]any) {
		out[name] = celType(p.(map[string]any))
	}
	return out
}

func celType(s map[string]any) string {
	if title, ok := s["title"].(string); ok {
		return strings.TrimPrefix(title, "turngate.")
	}
	switch s["type"] {
	case "string":
		if s["format"] == "date-time" {
			return "timestamp"
		}
		return "string"
	case "integer":
		return "int"
	case "number":
		return "double"
	case "boolean":
		return "bool"
	case "array":
		return "list(" + celType(s["items"].(map[string]any)) + ")"
	case "object":
		return "map(string, " + celType(s["additionalProperties"].(map[string]any)) + ")"
	}
	return "dyn"
}

// sameType compares a table's type cell with a schema's type, ignoring
// the cell's formatting ("object / null" is "object or null").
func sameType(cell, schema string) bool {
	norm := func(s string) string { return strings.ReplaceAll(strings.Trim(s, "`"), " / ", " or ") }
	return norm(cell) == norm(schema)
}
