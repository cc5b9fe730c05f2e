package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// confirmTool is a client tool as an OpenAI request declares it.
var confirmTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "confirm", "description": "Ask the user.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"question": map[string]any{"type": "string"}}},
}}

func TestOpenAINonStreaming(t *testing.T) {
	g := newTestGateway(t, "basic")
	var out struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	// A server tool runs inside the gateway; the client gets the answer.
	g.doJSON("POST", "/v1/chat/completions", map[string]any{"model": "demo",
		"messages": []any{map[string]any{"role": "user", "content": "weather in Paris"}}}, http.StatusOK, &out)
	if out.Object != "chat.completion" || out.Model != "demo" || len(out.Choices) != 1 {
		t.Fatalf("response %+v", out)
	}
	c := out.Choices[0]
	if c.FinishReason != "stop" || !strings.Contains(c.Message.Content, "Here is the weather") || c.Message.Role != "assistant" {
		t.Errorf("choice %+v", c)
	}
	if out.Usage.TotalTokens == 0 {
		t.Error("no usage")
	}

	// A declared tool is a client tool: returned as tool_calls.
	req := map[string]any{"model": "other", "tools": []any{confirmTool},
		"messages": []any{map[string]any{"role": "user", "content": "please confirm"}}}
	g.doJSON("POST", "/v1/chat/completions", req, http.StatusOK, &out)
	c = out.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("client tool choice %+v", c)
	}
	call := c.Message.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != "confirm" || !json.Valid([]byte(call.Function.Arguments)) || call.ID == "" {
		t.Errorf("tool call %+v", call)
	}

	// The client answers with the tool result; the turn continues.
	req["messages"] = []any{
		map[string]any{"role": "user", "content": "please confirm"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function",
			"function": map[string]any{"name": "confirm", "arguments": call.Function.Arguments}}}},
		map[string]any{"role": "tool", "tool_call_id": call.ID, "content": `"yes"`},
	}
	g.doJSON("POST", "/v1/chat/completions", req, http.StatusOK, &out)
	if c := out.Choices[0]; c.FinishReason != "stop" || !strings.Contains(c.Message.Content, "You answered: yes") {
		t.Errorf("after the tool result: %+v", c)
	}
}

// oaiChunk is a chat.completion.chunk as the tests read it.
type oaiChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role      *string `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

func TestOpenAIStreaming(t *testing.T) {
	g := newTestGateway(t, "basic")
	resp := g.do("POST", "/v1/chat/completions", map[string]any{"model": "other", "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "tools": []any{confirmTool},
		"messages": []any{map[string]any{"role": "user", "content": "please confirm"}}})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks := decodeSSE[oaiChunk](t, resp.Body)
	if len(chunks) < 4 {
		t.Fatalf("%d chunks", len(chunks))
	}
	first := chunks[0]
	if first.Object != "chat.completion.chunk" || first.Choices[0].Delta.Role == nil || *first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk %+v does not carry the role", first)
	}
	var content strings.Builder
	var finish string
	toolCall := false
	for i, c := range chunks {
		if c.ID != first.ID {
			t.Errorf("chunk %d has id %q, want %q", i, c.ID, first.ID)
		}
		if len(c.Choices) == 0 {
			if i != len(chunks)-1 || c.Usage == nil || c.Usage.TotalTokens == 0 {
				t.Errorf("chunk %d: a choiceless chunk must be the final usage chunk: %+v", i, c)
			}
			continue
		}
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			content.WriteString(*ch.Delta.Content)
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == nil || *tc.Index != 0 || tc.ID == "" || tc.Type != "function" || tc.Function.Name != "confirm" {
				t.Errorf("tool call fragment %+v", tc)
			}
			toolCall = true
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if content.String() != "I need your confirmation." {
		t.Errorf("content %q", content.String())
	}
	if !toolCall || finish != "tool_calls" {
		t.Errorf("tool call seen %v, finish_reason %q", toolCall, finish)
	}
}

func TestOpenAIErrors(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Limits.MaxBodyBytes = 4096
		c.Limits.MaxMessages = 3
	})
	user := map[string]any{"role": "user", "content": "x"}
	tests := []struct {
		name string
		body any
		want int
		code string
	}{
		{"unknown model", map[string]any{"model": "gpt-9", "messages": []any{map[string]any{"role": "user", "content": "x"}}}, 404, "model_not_found"},
		{"no messages", map[string]any{"model": "demo"}, 400, CodeInvalidRequest},
		{"bad role", map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "robot", "content": "x"}}}, 400, CodeInvalidRequest},
		{"malformed", `{"model":`, 400, CodeInvalidJSON},
		{"server tool shadowed", map[string]any{"model": "demo", "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "weather"}}},
			"messages": []any{map[string]any{"role": "user", "content": "x"}}}, 400, CodeInvalidRequest},
		{"invalid UTF-8", "{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, CodeInvalidJSON},
		{"messages of the wrong type", `{"model":"demo","messages":"x"}`, 400, CodeInvalidRequest},
		{"content of the wrong type", `{"model":"demo","messages":[{"role":"user","content":5}]}`, 400, CodeInvalidRequest},
		{"too many messages", map[string]any{"model": "demo", "messages": []any{user, user, user, user}}, 413, CodeTooLarge},
		{"body too large", `{"model":"demo","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, CodeTooLarge},
		{"orphan tool result", map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "tool", "tool_call_id": "x", "content": "1"}}}, 400, CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do("POST", "/v1/chat/completions", tc.body)
			defer resp.Body.Close()
			var body struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || body.Error.Code != tc.code || body.Error.Message == "" || body.Error.Type == "" {
				t.Errorf("status %d, error %+v; want %d %s", resp.StatusCode, body.Error, tc.want, tc.code)
			}
			if resp.Header.Get("x-should-retry") != "false" {
				t.Error("a client error must carry x-should-retry: false")
			}
		})
	}
}
