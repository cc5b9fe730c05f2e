package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"

	"github.com/turngate/turngate/engine"
)

// builtins are the gateway's deterministic demo executors, named by a
// config tool's builtin field. They need no network, so the quick start and
// the tests show real tool calls with the scripted model.
var builtins = map[string]engine.Executor{
	"weather": engine.ExecutorFunc(weatherTool),
	"search":  engine.ExecutorFunc(searchTool),
	"delete":  engine.ExecutorFunc(deleteTool),
	"echo":    engine.ExecutorFunc(echoTool),
}

// decodeInput decodes a tool input, naming the tool on failure.
func decodeInput(call engine.ToolExecution, v any) error {
	if err := json.Unmarshal(call.Input, v); err != nil {
		return engine.PublicError(call.ToolName+": invalid input", err)
	}
	return nil
}

// weatherTool answers a made-up but stable forecast for a city.
func weatherTool(_ context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	var in struct {
		City string `json:"city"`
	}
	if err := decodeInput(call, &in); err != nil {
		return nil, err
	}
	if in.City == "" {
		return nil, engine.PublicError("weather: city is required", nil)
	}
	h := fnv.New32a()
	h.Write([]byte(in.City))
	n := h.Sum32()
	conditions := []string{"sunny", "cloudy", "rainy", "windy"}
	return json.Marshal(map[string]any{"city": in.City, "weather": conditions[n%4], "tempC": int(n%30) - 5})
}

// searchShown caps how many results the demo search lists; the output
// echoes the limit it was called with, so a rewritten limit is visible.
const searchShown = 3

// searchTool returns numbered results for a query.
func searchTool(_ context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	var in struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := decodeInput(call, &in); err != nil {
		return nil, err
	}
	n := searchShown
	if in.Limit > 0 {
		n = min(in.Limit, searchShown)
	}
	results := make([]map[string]string, 0, n)
	for i := range n {
		results = append(results, map[string]string{
			"title": fmt.Sprintf("Result %d for %s", i+1, in.Query),
			"url":   fmt.Sprintf("https://example.com/search/%d", i+1),
		})
	}
	return json.Marshal(map[string]any{"query": in.Query, "limit": in.Limit, "results": results})
}

// deleteTool pretends to delete a path; rules are expected to block it.
func deleteTool(_ context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	var in map[string]any
	if err := decodeInput(call, &in); err != nil {
		return nil, err
	}
	target := in["path"]
	if target == nil {
		target = in["id"]
	}
	return json.Marshal(map[string]any{"deleted": target})
}

// echoTool returns its input.
func echoTool(_ context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	return call.Input, nil
}
