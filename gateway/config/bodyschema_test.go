package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBodySchema parses agents' bodySchema in both inline forms and
// derives the schema of the rules' input.body from them.
func TestBodySchema(t *testing.T) {
	const modeYAML = "{type: object, properties: {mode: {enum: [read-only, read-write]}}}"
	const modeJSON = `{"type": "object", "properties": {"mode": {"enum": ["read-only", "read-write"]}}}`
	const tierJSON = `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"tier": {"type": "integer"}}}`
	twoAgents := func(a, b string) string {
		y := "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents:\n  - name: a\n    model: m\n"
		if a != "" {
			y += "    bodySchema: " + a + "\n"
		}
		y += "  - name: b\n    model: m\n"
		if b != "" {
			y += "    bodySchema: " + b + "\n"
		}
		return y
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"no agent declares one: open", twoAgents("", ""), "null"},
		{"one agent of two: open", twoAgents(modeYAML, ""), "null"},
		{"the same schema, in YAML and JSON", twoAgents(modeYAML, modeJSON),
			`{"properties":{"mode":{"enum":["read-only","read-write"]}},"type":"object"}`},
		{"different schemas: anyOf, without $schema", twoAgents(modeJSON, tierJSON),
			`{"anyOf":[{"properties":{"mode":{"enum":["read-only","read-write"]}},"type":"object"},{"properties":{"tier":{"type":"integer"}},"type":"object"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tt.yaml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(c.BodySchema())
			if err != nil || string(got) != tt.want {
				t.Errorf("BodySchema() = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestInvalidBodySchema: a bodySchema that is not a JSON Schema is a
// config error naming the agent and its line.
func TestInvalidBodySchema(t *testing.T) {
	_, err := Parse("t.yaml", []byte(agentYAML("bodySchema: {type: obejct}")), env(nil))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{"line 5 col 25: agents[0] (a): bodySchema:", "not valid against metaschema", "\n    - at ''", "\n        - at '/type'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
