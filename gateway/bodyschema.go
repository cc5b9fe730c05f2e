package gateway

import (
	"errors"
	"net/http"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// bodyPrinter renders the validator's messages.
var bodyPrinter = message.NewPrinter(language.English)

// checkBody validates a request's custom body fields (no body is {})
// against the agent's bodySchema, answering 400 invalid_body with the JSON
// pointer of the first violation.
func (a *agent) checkBody(body map[string]any) error {
	if a.bodySchema == nil {
		return nil
	}
	doc := any(map[string]any{})
	if body != nil {
		doc = body
	}
	err := a.bodySchema.Validate(doc)
	if err == nil {
		return nil
	}
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return errorf(http.StatusBadRequest, CodeInvalidBody, "body: %v", err)
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	var ptr strings.Builder
	for _, tok := range ve.InstanceLocation {
		ptr.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	ae := errorf(http.StatusBadRequest, CodeInvalidBody, "body%s: %s", ptr.String(), ve.ErrorKind.LocalizedString(bodyPrinter))
	ae.Pointer = ptr.String()
	return ae
}
