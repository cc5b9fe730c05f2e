package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleAnthropicClient: on POST /v1/messages the server tool runs in the
// gateway, a declared tool comes back as tool_use, and the rule blocks the
// client's delete_file for this entry path, with a decision record saying
// so.
func exampleAnthropicClient(t *testing.T, x *exampleRun) {
	acme := x.as("acme-demo-5f1c0e2d9b8a47361c2d3e4f5a6b7c8d")
	post := func(body map[string]any) (string, map[string]any) {
		t.Helper()
		resp := acme.do("POST", "/v1/messages", body)
		data, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		return string(data), out
	}
	user := func(text string) []any { return []any{map[string]any{"role": "user", "content": text}} }
	if body, out := post(map[string]any{"model": "assistant", "max_tokens": 64, "messages": user("weather in Lima")}); out["stop_reason"] != "end_turn" ||
		!strings.Contains(body, `Here is the weather: {\"city\":\"Lima\"`) {
		t.Errorf("weather: %s", body)
	}
	location := []any{map[string]any{"name": "get_location", "input_schema": map[string]any{"type": "object"}}}
	if body, out := post(map[string]any{"model": "assistant", "max_tokens": 64, "tools": location, "messages": user("where am i")}); out["stop_reason"] != "tool_use" ||
		!strings.Contains(body, `"name":"get_location","type":"tool_use"`) {
		t.Errorf("client tool: %s", body)
	}
	del := []any{map[string]any{"name": "delete_file", "input_schema": map[string]any{"type": "object"}}}
	body, _ := post(map[string]any{"model": "assistant", "max_tokens": 64, "tools": del, "messages": user("delete notes.txt")})
	if !strings.Contains(body, "Delete said: deleting files is not allowed from Claude clients") || strings.Contains(body, "tool_use") {
		t.Errorf("blocked delete: %s", body)
	}
	// The session is ephemeral (no id the client knows): look for the
	// record itself.
	poll(t, "the block's decision record", func() error {
		data, _ := os.ReadFile(filepath.Join(x.dir, "data", "audit.log"))
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"hook":"beforeToolCall"`) && strings.Contains(line, `"entryPath":"anthropic"`) &&
				strings.Contains(line, "deleting files is not allowed from Claude clients") {
				return nil
			}
		}
		return fmt.Errorf("no beforeToolCall record of the block on entry path anthropic among %d bytes", len(data))
	})
}
