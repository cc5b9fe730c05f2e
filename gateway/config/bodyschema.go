package config

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turngate/turngate/engine"
)

// CompileBodySchema compiles a's bodySchema for validating request
// bodies; it returns nil when the agent declares none.
func (a *Agent) CompileBodySchema() (*jsonschema.Schema, error) {
	if a.BodySchema == nil {
		return nil, nil
	}
	raw, err := json.Marshal(a.BodySchema)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return engine.CompileSchema(raw)
}

// BodySchema returns the JSON Schema of input.body for the Rego rules:
// nil (an open object) unless every agent declares a bodySchema, then the
// one schema when there is one agent or all declare the same, else their
// anyOf — a rule may read a field any agent's bodies can have. Each
// schema's $schema is dropped: the rules' type checker reads the shape,
// and the request validation has already applied the draft.
func (c *Config) BodySchema() any {
	var schemas []any
	seen := map[string]bool{}
	for i := range c.Agents {
		s := c.Agents[i].BodySchema
		if s == nil {
			return nil
		}
		raw, err := json.Marshal(s)
		if err != nil || seen[string(raw)] {
			continue
		}
		seen[string(raw)] = true
		s = maps.Clone(s)
		delete(s, "$schema")
		schemas = append(schemas, s)
	}
	switch len(schemas) {
	case 0:
		return nil
	case 1:
		return schemas[0]
	}
	return map[string]any{"anyOf": schemas}
}
