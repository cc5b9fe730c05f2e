package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
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
		{name: "too many files", body: map[string]any{"model": "demo", "messages": []any{user, map[string]any{"role": "user", "content": append(slices.Repeat([]any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}}}, 4),
			map[string]any{"type": "file", "file": map[string]any{"file_id": "f1"}}, map[string]any{"type": "text", "text": "look"})}}},
			want: 400, code: CodeInvalidAttachment},
		{"image in a tool result", map[string]any{"model": "demo", "messages": []any{
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "shot", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": []any{map[string]any{"type": "text", "text": "the screenshot:"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}}}}}}, 400, CodeInvalidRequest},
	}
	// params are the error params of the cases that name a field.
	params := map[string]string{"bad role": "messages[0].role", "server tool shadowed": "tools[0].function.name",
		"orphan tool result": "messages[0].tool_call_id", "too many files": "messages[1].content",
		"image in a tool result": "messages[1].content[1]"}
	// says are what the messages of some cases say.
	says := map[string]string{"image in a tool result": "a tool message's content may hold text parts only, not image_url"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do("POST", "/v1/chat/completions", tc.body)
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || body.Error.Code != tc.code || body.Error.Message == "" || body.Error.Type == "" {
				t.Errorf("status %d, error %+v; want %d %s", resp.StatusCode, body.Error, tc.want, tc.code)
			}
			if param, ok := params[tc.name]; ok && (body.Error.Param == nil || *body.Error.Param != param || !strings.Contains(body.Error.Message, param)) {
				t.Errorf("error %+v, want param and message naming %s", body.Error, param)
			}
			if want := says[tc.name]; !strings.Contains(body.Error.Message, want) || tc.want == 400 && body.Error.Type != "invalid_request_error" {
				t.Errorf("error %+v, want an invalid_request_error saying %q", body.Error, want)
			}
			if resp.Header.Get("x-should-retry") != "false" {
				t.Error("a client error must carry x-should-retry: false")
			}
		})
	}
}

// TestOpenAIFieldTypes checks that every field the endpoint reads, or
// accepts and ignores, is type- and range-checked: a wrong value is a 400
// in OpenAI's error body whose param is the field's JSON path and whose
// message names the JSON type expected, never a silently ignored value.
func TestOpenAIFieldTypes(t *testing.T) {
	g := newTestGateway(t, "basic")
	const user = `{"role":"user","content":"x"}`
	body := func(extra string) string { return `{"model":"demo","messages":[` + user + `]` + extra + `}` }
	part := func(p string) string {
		return `{"model":"demo","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` + p + `]}]}`
	}
	tests := []struct {
		name, body, param, message string
	}{
		{"temperature a word", body(`,"temperature":"hot"`), "temperature", `field temperature: expected a number, got JSON string "hot"`},
		{"temperature a numeric string", body(`,"temperature":"0.2"`), "temperature", `field temperature: expected a number, got JSON string "0.2"`},
		{"temperature above 2", body(`,"temperature":2.5`), "temperature", "field temperature: must be between 0 and 2, not 2.5"},
		{"top_p above 1", body(`,"top_p":1.1`), "top_p", "field top_p: must be between 0 and 1, not 1.1"},
		{"presence_penalty below -2", body(`,"presence_penalty":-3`), "presence_penalty", "field presence_penalty: must be between -2 and 2, not -3"},
		{"n above 1", body(`,"n":2`), "n", "field n: must be 1 (the gateway answers one choice), not 2"},
		{"max_tokens a fraction", body(`,"max_tokens":10.5`), "max_tokens", "field max_tokens: expected an integer, got JSON number 10.5"},
		{"seed a string", body(`,"seed":"7"`), "seed", `field seed: expected an integer, got JSON string "7"`},
		{"stream a string", body(`,"stream":"yes"`), "stream", `field stream: expected true or false, got JSON string "yes"`},
		{"include_usage a number", body(`,"stream_options":{"include_usage":1}`), "stream_options.include_usage", "field stream_options.include_usage: expected true or false, got JSON number 1"},
		{"stop a number", body(`,"stop":5`), "stop", "field stop: expected a string or an array of strings, got JSON number 5"},
		{"stop item a number", body(`,"stop":["a",5]`), "stop[1]", "field stop[1]: expected a string, got JSON number 5"},
		{"logit_bias value out of range", body(`,"logit_bias":{"50256":-101}`), "logit_bias.50256", "field logit_bias.50256: must be between -100 and 100, not -101"},
		{"metadata value a number", body(`,"metadata":{"k":1}`), "metadata.k", "field metadata.k: expected a string, got JSON number 1"},
		{"user an object", body(`,"user":{}`), "user", "field user: expected a string, got JSON object"},
		{"model a number", `{"model":5,"messages":[` + user + `]}`, "model", "field model: expected a string, got JSON number 5"},
		{"model missing", `{"messages":[` + user + `]}`, "model", "field model: is required: the name of one of this gateway's agents"},
		{"messages an object", `{"model":"demo","messages":{}}`, "messages", "field messages: expected an array, got JSON object"},
		{"message a string", `{"model":"demo","messages":["hi"]}`, "messages[0]", `field messages[0]: expected an object, got JSON string "hi"`},
		{"role a number", `{"model":"demo","messages":[{"role":1,"content":"x"}]}`, "messages[0].role", "field messages[0].role: expected a string, got JSON number 1"},
		{"content a number", `{"model":"demo","messages":[{"role":"user","content":5}]}`, "messages[0].content", "field messages[0].content: expected a string or an array of content parts, got JSON number 5"},
		{"image_url a number", part(`{"type":"image_url","image_url":5}`), "messages[0].content[1].image_url", "field messages[0].content[1].image_url: expected an object, got JSON number 5"},
		{"image_url.url a number", part(`{"type":"image_url","image_url":{"url":5}}`), "messages[0].content[1].image_url.url", "field messages[0].content[1].image_url.url: expected a string, got JSON number 5"},
		{"text part's text a number", part(`{"type":"text","text":5}`), "messages[0].content[1].text", "field messages[0].content[1].text: expected a string, got JSON number 5"},
		{"part a string", part(`"hi"`), "messages[0].content[1]", `field messages[0].content[1]: expected a content part object, got JSON string "hi"`},
		{"part without a type", part(`{"text":"hi"}`), "messages[0].content[1].type", "field messages[0].content[1].type: is required: one of file, image_url, input_audio, refusal, text"},
		{"part of an unknown type", part(`{"type":"video","video":{}}`), "messages[0].content[1].type", `field messages[0].content[1].type: must be one of file, image_url, input_audio, refusal, text, not "video"`},
		{"tool call arguments an object", `{"model":"demo","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":{}}}]},` + user + `]}`,
			"messages[0].tool_calls[0].function.arguments", "field messages[0].tool_calls[0].function.arguments: expected a string, got JSON object"},
		{"tool_call_id a number", `{"model":"demo","messages":[{"role":"tool","tool_call_id":1,"content":"x"}]}`, "messages[0].tool_call_id", "field messages[0].tool_call_id: expected a string, got JSON number 1"},
		{"tools an object", body(`,"tools":{}`), "tools", "field tools: expected an array, got JSON object"},
		{"tool parameters a string", body(`,"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]`), "tools[0].function.parameters", `field tools[0].function.parameters: expected an object, got JSON string "{}"`},
		{"tool strict a string", body(`,"tools":[{"type":"function","function":{"name":"f","strict":"yes"}}]`), "tools[0].function.strict", `field tools[0].function.strict: expected true or false, got JSON string "yes"`},
		{"tool_choice a number", body(`,"tool_choice":1`), "tool_choice", "field tool_choice: expected a string or an object, got JSON number 1"},
		{"body an array", `[1]`, "", "the request body must be a JSON object, got JSON array"},
		{"a number too large", body(`,"temperature":1e400`), "temperature", "field temperature: must be between 0 and 2, not 1e400"},
		{"an integer too large", body(`,"seed":1e400`), "seed", "field seed: expected an integer, got JSON number 1e400"},
		{"trailing data", body(``) + ` {}`, "", "request body has data after the JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do("POST", "/v1/chat/completions", tc.body)
			defer resp.Body.Close()
			var out struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			e := out.Error
			if resp.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Code == "" {
				t.Fatalf("status %d, error %+v", resp.StatusCode, e)
			}
			if param := derefOr(e.Param, ""); param != tc.param {
				t.Errorf("param %q, want %q", param, tc.param)
			}
			if tc.message != "" && e.Message != tc.message {
				t.Errorf("message\n %s\nwant\n %s", e.Message, tc.message)
			}
			if goTypeName.MatchString(e.Message) {
				t.Errorf("message %q names a Go type", e.Message)
			}
		})
	}
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// TestOpenAIAcceptsDefinedFields checks that the fields OpenAI defines and
// the gateway ignores, well typed, and keys OpenAI does not define are
// accepted: an SDK sending them gets an answer.
func TestOpenAIAcceptsDefinedFields(t *testing.T) {
	g := newTestGateway(t, "basic")
	body := `{"model":"demo","messages":[{"role":"system","content":[{"type":"text","text":"Be brief."}]},
		{"role":"user","name":"ann","content":[{"type":"text","text":"weather in Paris"},
			{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}},
			{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},
			{"type":"file","file":{"file_id":"f1"}}],"x_extra":1}],
		"temperature":0.2,"top_p":1,"n":1,"max_tokens":100,"max_completion_tokens":100,"seed":7,
		"frequency_penalty":-2,"presence_penalty":2,"stop":["\n"],"logprobs":false,"top_logprobs":0,
		"logit_bias":{"50256":-100},"user":"u","safety_identifier":"s","prompt_cache_key":"k",
		"metadata":{"k":"v"},"store":false,"service_tier":"auto","reasoning_effort":"low","verbosity":"low",
		"parallel_tool_calls":true,"tool_choice":"auto","response_format":{"type":"text"},"modalities":["text"],
		"stream":false,"stream_options":null,"audio":null,"prediction":null,"web_search_options":null,
		"some_future_field":{"a":[1]}}`
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	g.doJSON("POST", "/v1/chat/completions", body, http.StatusOK, &out)
	if len(out.Choices) != 1 || !strings.Contains(out.Choices[0].Message.Content, "weather") {
		t.Errorf("choices %+v", out.Choices)
	}
}
