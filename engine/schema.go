package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turngate/turngate/engine/internal/localschema"
)

// maxCachedSchemas bounds the compiled-schema cache. Tool schemas come from
// configuration, so a turngate instance sees few distinct ones; the bound only
// protects against a caller that sends a new schema with every turn.
const maxCachedSchemas = 1024

// schemaCache holds compiled JSON Schemas keyed by their bytes, so each
// distinct schema is compiled once per Engine.
type schemaCache struct {
	mu sync.RWMutex
	m  map[string]compiledSchema
}

type compiledSchema struct {
	schema *jsonschema.Schema
	err    error
}

// compile returns the compiled form of raw, compiling it on first use.
func (c *schemaCache) compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	c.mu.RLock()
	cs, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return cs.schema, cs.err
	}
	cs.schema, cs.err = compileSchema(raw)
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string]compiledSchema)
	}
	if len(c.m) < maxCachedSchemas {
		c.m[string(raw)] = cs
	}
	c.mu.Unlock()
	return cs.schema, cs.err
}

// CompileSchema compiles raw, a standalone JSON Schema, as tool input
// schemas are compiled: every $ref to another document is refused.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) { return compileSchema(raw) }

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing schema: %w", err)
	}
	s, err := localschema.Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("compiling schema: %w", err)
	}
	return s, nil
}

// validate checks that value is JSON and, when schema is set, that it
// validates against it. The error says what is wrong, without schema URLs.
func (c *schemaCache) validate(schema, value json.RawMessage) error {
	if len(value) == 0 {
		return errors.New("value is empty")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("value is not valid JSON: %w", err)
	}
	if len(schema) == 0 {
		return nil
	}
	s, err := c.compile(schema)
	if err != nil {
		return fmt.Errorf("tool schema is invalid: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return errors.New(validationText(err))
	}
	return nil
}

// validationText flattens a jsonschema error into one line, dropping the
// header that names the in-memory schema URL.
func validationText(err error) string {
	lines := strings.Split(err.Error(), "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if l == "" || strings.HasPrefix(l, "jsonschema validation failed") {
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return "value does not match the schema"
	}
	return strings.Join(out, "; ")
}

// CheckSchema reports whether raw is a JSON Schema the engine can compile:
// what a tool's input schema must be. Configuration checks it at startup,
// so a broken schema fails there rather than at the tool's first call.
func CheckSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}
