package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

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

// schemaPath returns the field path, under base (the schema's own), of
// the part of a JSON Schema that err, its failure to compile, is about: the
// location of the first of its metaschema errors' innermost causes ("type"
// of {type: objekt}), or base when err says none.
func schemaPath(base string, err error) string {
	var se *jsonschema.SchemaValidationError
	if !errors.As(err, &se) {
		return base
	}
	ve, ok := se.Err.(*jsonschema.ValidationError)
	if !ok {
		return base
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	path := base
	for _, seg := range ve.InstanceLocation {
		if _, err := strconv.Atoi(seg); err == nil {
			path += "[" + seg + "]"
		} else {
			path = keyPath(path, seg)
		}
	}
	return path
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
