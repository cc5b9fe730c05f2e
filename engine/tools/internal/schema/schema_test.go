package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr string
	}{
		{name: "object schema", schema: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`},
		{name: "no type", schema: `{"properties":{"a":{}}}`},
		{name: "local ref", schema: `{"type":"object","$defs":{"c":{"type":"string"}},"properties":{"city":{"$ref":"#/$defs/c"}}}`},
		{name: "empty", schema: ` `, wantErr: "schema is empty"},
		{name: "not json", schema: `{"type":`, wantErr: "parsing schema: "},
		{name: "boolean schema", schema: `true`, wantErr: "schema must be a JSON object"},
		{name: "array type", schema: `{"type":"array"}`, wantErr: `schema type must be "object", got array`},
		{name: "invalid keyword value", schema: `{"type":"object","properties":{"n":{"minimum":"one"}}}`,
			wantErr: "not a valid JSON Schema: at /properties/n/minimum: got string, want number"},
		{name: "file ref refused", schema: `{"type":"object","properties":{"p":{"$ref":"file:///etc/passwd"}}}`,
			wantErr: "external $ref is not allowed in tool schemas"},
		{name: "remote ref refused", schema: `{"type":"object","properties":{"p":{"$ref":"https://example.com/s.json"}}}`,
			wantErr: "external $ref is not allowed in tool schemas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(json.RawMessage(tt.schema))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("error = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
