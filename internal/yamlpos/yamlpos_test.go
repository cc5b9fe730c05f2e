package yamlpos

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestLocate: a syntax error is at the problem's line and column, and the
// usual indentation mistakes are said in plain words (want, a prefix of
// the message; "" checks only that there is one), yaml.v3's words kept
// after them. A col of 0 is not checked.
func TestLocate(t *testing.T) {
	tests := []struct {
		name, doc string
		line, col int
		want      string
	}{
		{"bad indent deep in a list", "rules:\n  - name: a\n    when: x\n  - name: b\n    description: d\n   when: y\n", 6, 4, ""},
		{"unclosed quote: yaml.v3's line when the parsers disagree", "a: \"open\nb: c\n", 3, 0, ""},
		{"tab indent", "a:\n\tb: c\n", 2, 0, ""},
		{"over-indented key", "beforeTurn:\n  - name: a\n    when: x\n      set:\n      model: y\n", 4, 7,
			`"set" is indented deeper than "when" on the line above (column 7, not 5), so YAML reads it as more of "when"'s value, where a key cannot start: indent it as far as the keys it belongs with (mapping values are not allowed in this context)`},
		{"over-indented key in a list item", "rules:\n  - name: a\n     when: x\n", 3, 6,
			`"when" is indented deeper than "name" on the line above (column 6, not 5)`},
		{"over-indented key after a comment", "a:\n  b: 1\n  # note\n    c: 2\n", 4, 5,
			"this line's indentation lines up with no key of the block above it"},
		{"a value holding a colon", "rules:\n  - when: a == \"x\": y\n", 2, 19,
			`a value holds ": ", which YAML reads as the start of another key: quote the value (mapping values are not allowed in this context)`},
		{"under-indented key", "a:\n  b:\n      c: 1\n     d: 2\n", 4, 6,
			"this line's indentation lines up with no key of the block above it: indent it as far as the keys it belongs with (did not find expected key)"},
		{"key off its list item", "rules:\n  - name: a\n    when: x\n   set: y\n", 4, 4,
			`this line's indentation lines up with neither the list's items nor their keys: an item starts with "- " under the list's other items, and its keys line up after the "- " (did not find expected '-' indicator)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tt.doc), &n)
			if err == nil {
				t.Fatal("yaml.v3 accepted the document")
			}
			got, ok := Locate([]byte(tt.doc), err)
			if !ok || got.Line != tt.line || (tt.col > 0 && got.Column != tt.col) || got.Message == "" || !strings.HasPrefix(got.Message, tt.want) {
				t.Errorf("Locate = %+v, %v; want %d:%d %q (yaml.v3 said %v)", got, ok, tt.line, tt.col, tt.want, err)
			}
		})
	}
	if _, ok := Locate(nil, errors.New("not a syntax error")); ok {
		t.Error("Locate accepted an error that is not yaml.v3's syntax error")
	}
}

// FuzzLocate feeds arbitrary documents: whatever yaml.v3 refuses is located
// inside the document, with a message, and nothing panics.
func FuzzLocate(f *testing.F) {
	for _, seed := range []string{
		"beforeTurn:\n  - name: a\n    when: x\n      set:\n      model: y\n",
		"rules:\n  - when: a == \"x\": y\n", "a:\n  b:\n      c: 1\n     d: 2\n",
		"rules:\n  - name: a\n    when: x\n   set: y\n", "- - : :\n  :", "a: \"open\nb: c\n", ": x: y",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var n yaml.Node
		err := yaml.Unmarshal(data, &n)
		if err == nil {
			return
		}
		e, ok := Locate(data, err)
		if !ok {
			return
		}
		// yaml.v3 counts a lone \r as a line break too.
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") + 1
		if e.Line < 1 || e.Line > lines || e.Column < 0 || e.Message == "" {
			t.Fatalf("Locate = %+v for a %d-line document (yaml.v3: %v)", e, lines, err)
		}
	})
}
