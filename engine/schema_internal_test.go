package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSchemaCacheCompilesOnce(t *testing.T) {
	var c schemaCache
	schema := json.RawMessage(`{"type":"object","required":["q"]}`)
	for range 3 {
		if err := c.validate(schema, json.RawMessage(`{"q":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	first := c.m[string(schema)].schema
	if len(c.m) != 1 || first == nil {
		t.Fatalf("cache %v", c.m)
	}
	if s, _ := c.compile(schema); s != first {
		t.Error("schema compiled twice")
	}
}

func TestSchemaValidationErrors(t *testing.T) {
	tests := []struct {
		name, schema, value, want string
	}{
		{name: "type", schema: `{"type":"object","properties":{"q":{"type":"string"}}}`, value: `{"q":1}`, want: "at '/q': got number, want string"},
		{name: "not JSON", schema: `{}`, value: `{`, want: "value is not valid JSON"},
		{name: "trailing data", schema: `{}`, value: `{} {}`, want: "value is not valid JSON"},
		{name: "empty", schema: `{}`, value: ``, want: "value is empty"},
		{name: "external ref refused", schema: `{"$ref":"file:///etc/passwd"}`, value: `{}`, want: "not allowed"},
		{name: "broken schema", schema: `{"type":12}`, value: `{}`, want: "tool schema is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c schemaCache
			err := c.validate(json.RawMessage(tt.schema), json.RawMessage(tt.value))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
