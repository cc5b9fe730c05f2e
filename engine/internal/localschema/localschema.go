// Package localschema compiles JSON Schemas that must stand alone: tool
// input schemas (from configuration or a remote MCP server) and structured
// output schemas (from a turn's configuration). Every $ref to another
// document is refused, so a schema never makes the gateway read local files
// or fetch URLs.
package localschema

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// errExternalRef is the loader's answer to a $ref to another document. The
// validator reports its text after the URL but does not wrap it.
var errExternalRef = errors.New("external $ref is not allowed in tool schemas or output schemas")

// resourceURL is the name a schema is compiled under; it never leaves
// memory and appears only in the validator's messages.
const resourceURL = "turngate:///schema.json"

// refusingLoader is the compiler's loader: it loads nothing.
type refusingLoader struct{}

// Load refuses every URL.
func (refusingLoader) Load(string) (any, error) { return nil, errExternalRef }

// Compile compiles doc, a schema parsed by jsonschema.UnmarshalJSON, with
// every external reference refused. A schema that is not a valid JSON
// Schema fails with a *jsonschema.SchemaValidationError.
func Compile(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("adding schema: %w", err)
	}
	return c.Compile(resourceURL)
}
