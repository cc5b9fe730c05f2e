// Package schema checks tool input schemas when tools are built, so that a
// broken schema is a startup error (configured tools) or a skipped tool (MCP
// discovery) rather than a failure in the middle of a turn.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/turngate/turngate/engine/internal/localschema"
)

// Check reports whether raw is a valid JSON Schema (draft 2020-12 unless
// the schema names another draft with $schema) for a tool's input: a schema
// object whose type, if given, is "object", since models call tools with
// JSON objects. References to other documents are refused.
func Check(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return errors.New("schema is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("parsing schema: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return errors.New("schema must be a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return fmt.Errorf(`schema type must be "object", got %v`, t)
	}
	if _, err := localschema.Compile(doc); err != nil {
		var invalid *jsonschema.SchemaValidationError
		var verr *jsonschema.ValidationError
		if errors.As(err, &invalid) && errors.As(invalid.Err, &verr) {
			return fmt.Errorf("not a valid JSON Schema: %s", strings.Join(leaves(verr, nil), "; "))
		}
		return fmt.Errorf("compiling schema: %w", err)
	}
	return nil
}

// printer renders validation messages.
var printer = message.NewPrinter(language.English)

// leaves appends one line per innermost failure of e, "at <location>:
// <message>": the metaschema's allOf/anyOf wrappers say nothing useful.
func leaves(e *jsonschema.ValidationError, out []string) []string {
	if len(e.Causes) == 0 {
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		return append(out, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(printer)))
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}
