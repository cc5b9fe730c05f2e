package yamlpos

import (
	"errors"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestLocate(t *testing.T) {
	tests := []struct {
		name, doc string
		line, col int
	}{
		{"bad indent deep in a list", "rules:\n  - name: a\n    when: x\n  - name: b\n    description: d\n   when: y\n", 6, 4},
		{"unclosed quote: yaml.v3's line when the parsers disagree", "a: \"open\nb: c\n", 3, 0},
		{"tab indent", "a:\n\tb: c\n", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tt.doc), &n)
			if err == nil {
				t.Fatal("yaml.v3 accepted the document")
			}
			got, ok := Locate([]byte(tt.doc), err)
			if !ok || got.Line != tt.line || (tt.col > 0 && got.Column != tt.col) || got.Message == "" {
				t.Errorf("Locate = %+v, %v; want line %d col %d (yaml.v3 said %v)", got, ok, tt.line, tt.col, err)
			}
		})
	}
	if _, ok := Locate(nil, errors.New("not a syntax error")); ok {
		t.Error("Locate accepted an error that is not yaml.v3's syntax error")
	}
}
