package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"

	js "github.com/turngate/turngate/gateway/jsonshape"
)

// The OpenAI endpoint's body is checked against oaiShape before it is
// decoded into oaiRequest, so every field OpenAI defines — those the
// gateway reads and those it accepts and ignores (sampling, n, user, …) —
// gets the same check: a value of the wrong JSON type, out of OpenAI's
// range or of an unknown kind is a 400 whose param is its JSON path, never
// a silently dropped value. Keys OpenAI does not define are accepted, at
// the top level as in nested objects (SDKs send back the messages they
// received, with keys of their own).

// oaiContentPart is a content part: text is read, the others are accepted
// and ignored (API.md, "Files").
var oaiContentPart = js.Tagged("a content part object", js.Fields{
	"text":        js.Object(js.Fields{"text": js.String()}),
	"refusal":     js.Object(js.Fields{"refusal": js.String()}),
	"image_url":   js.Object(js.Fields{"image_url": js.Object(js.Fields{"url": js.String(), "detail": js.String()})}),
	"input_audio": js.Object(js.Fields{"input_audio": js.Object(js.Fields{"data": js.String(), "format": js.String()})}),
	"file":        js.Object(js.Fields{"file": js.Object(js.Fields{"file_data": js.String(), "file_id": js.String(), "filename": js.String()})}),
})

var oaiShape = js.Object(js.Fields{
	"model": js.String(),
	"messages": js.Array(js.Object(js.Fields{
		"role":    js.String(),
		"content": js.OneOf("a string or an array of content parts", js.String(), js.Array(oaiContentPart)),
		"name":    js.String(),
		"refusal": js.String(),
		"tool_calls": js.Array(js.Object(js.Fields{
			"index":    js.Integer(),
			"id":       js.String(),
			"type":     js.String(),
			"function": js.Object(js.Fields{"name": js.String(), "arguments": js.String()}),
		})),
		"tool_call_id":  js.String(),
		"audio":         js.Object(js.Fields{"id": js.String()}),
		"function_call": js.Object(js.Fields{"name": js.String(), "arguments": js.String()}),
	})),
	"tools": js.Array(js.Object(js.Fields{
		"type": js.String(),
		"function": js.Object(js.Fields{
			"name": js.String(), "description": js.String(), "parameters": js.Object(nil), "strict": js.Bool(),
		}),
	})),
	"stream":         js.Bool(),
	"stream_options": js.Object(js.Fields{"include_usage": js.Bool(), "include_obfuscation": js.Bool()}),

	// Accepted and ignored: the agent's config decides these.
	"temperature":           js.Number(0, 2),
	"top_p":                 js.Number(0, 1),
	"frequency_penalty":     js.Number(-2, 2),
	"presence_penalty":      js.Number(-2, 2),
	"n":                     js.IntegerIn(1, 1).Named("1 (the gateway answers one choice)"),
	"max_tokens":            js.Integer(),
	"max_completion_tokens": js.Integer(),
	"seed":                  js.Integer(),
	"logprobs":              js.Bool(),
	"top_logprobs":          js.IntegerIn(0, 20),
	"logit_bias":            js.Map(js.Number(-100, 100)),
	"stop":                  js.OneOf("a string or an array of strings", js.String(), js.Array(js.String())),
	"tool_choice":           js.OneOf("a string or an object", js.String(), js.Object(nil)),
	"parallel_tool_calls":   js.Bool(),
	"response_format":       js.Object(js.Fields{"type": js.String()}),
	"user":                  js.String(),
	"safety_identifier":     js.String(),
	"prompt_cache_key":      js.String(),
	"metadata":              js.Map(js.String()),
	"store":                 js.Bool(),
	"service_tier":          js.String(),
	"reasoning_effort":      js.String(),
	"verbosity":             js.String(),
	"modalities":            js.Array(js.String()),
	"audio":                 js.Object(nil),
	"prediction":            js.Object(nil),
	"web_search_options":    js.Object(nil),
	"functions":             js.Array(js.Object(nil)),
	"function_call":         js.OneOf("a string or an object", js.String(), js.Object(nil)),
})

// decodeOAIRequest checks data against oaiShape and decodes it.
func decodeOAIRequest(data []byte) (*oaiRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "request body has data after the JSON value")
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errBadRequest("the request body must be a JSON object, got JSON %s", js.Describe(doc))
	}
	if err := oaiShape.Check(doc); err != nil {
		return nil, errField(err.Path, "%s", err.Message)
	}
	var req oaiRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, jsonError(err) // trailing data; the check passed every value
	}
	return &req, nil
}
