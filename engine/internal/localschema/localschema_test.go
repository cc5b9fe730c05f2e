package localschema

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name     string
		schema   string
		external bool
	}{
		{name: "plain", schema: `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{name: "local ref", schema: `{"$defs":{"c":{"type":"string"}},"properties":{"q":{"$ref":"#/$defs/c"}}}`},
		{name: "draft-07 by $schema", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`},
		{name: "file ref", schema: `{"$ref":"file:///etc/passwd"}`, external: true},
		{name: "https ref", schema: `{"properties":{"q":{"$ref":"https://example.com/s.json"}}}`, external: true},
		{name: "unknown metaschema", schema: `{"$schema":"https://example.com/meta.json"}`, external: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(doc)
			if tt.external {
				if err == nil || !strings.Contains(err.Error(), errExternalRef.Error()) {
					t.Fatalf("Compile error = %v, want %q", err, errExternalRef)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile error = %v", err)
			}
		})
	}
}
