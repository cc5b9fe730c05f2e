package wire

import (
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
)

// SetPtr sets b[key] to *v when v is not nil: unset sampling fields are
// left out of a request body so the provider's default applies.
func SetPtr[T any](b map[string]any, key string, v *T) {
	if v != nil {
		b[key] = *v
	}
}

// SchemaOrEmpty returns a tool's input schema, or the empty object schema
// both APIs require when a tool declares none.
func SchemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(s) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}

// OutputText is a tool output as the text a model API takes: a JSON string
// unquoted, anything else as its JSON text.
func OutputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// MergeOptions merges the provider's own section of providerOptions
// (options[name], as in the AI SDK) into body as extra fields.
func MergeOptions(body map[string]any, options map[string]any, name string) {
	if extra, ok := options[name].(map[string]any); ok {
		for k, v := range extra {
			body[k] = v
		}
	}
}

// Errorf builds a stream failure that is no HTTP error: not retryable.
func Errorf(format string, args ...any) error {
	return &engine.UpstreamError{Message: fmt.Sprintf(format, args...)}
}

// StreamError is the error of an in-stream error object ({"error":{…}}):
// retryable when its type is transient.
func StreamError(data []byte) error {
	var obj struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &obj)
	return &engine.UpstreamError{Retryable: RetryableErrorType(obj.Error.Type), Message: "error in stream: " + ErrorMessage(data)}
}

// Finish builds a stream's finish part: raw, the API's finish reason,
// mapped through reasons ("other" when unknown, as the AI SDK does), the
// step's usage and warnings, and meta as providerMetadata under the
// provider's name.
func Finish(name, raw string, reasons map[string]string, usage engine.Usage, meta map[string]any, warnings []string) engine.StreamPart {
	reason, ok := reasons[raw]
	if !ok {
		reason = engine.FinishOther
	}
	pm, _ := json.Marshal(map[string]any{name: meta}) // strings and numbers always marshal
	return engine.StreamPart{Type: engine.StreamFinish, FinishReason: reason, RawFinishReason: raw,
		Usage: &usage, ProviderMetadata: pm, Warnings: warnings}
}
