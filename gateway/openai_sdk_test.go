package gateway

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// TestOpenAIOfficialSDK talks to the endpoint with the official Go SDK,
// unmodified: a non-streaming completion, and a stream with the usage
// chunk folded by the SDK's accumulator, which also reports the client tool
// call as finished (protocols.md B.1).
func TestOpenAIOfficialSDK(t *testing.T) {
	g := newTestGateway(t, "basic")
	client := openai.NewClient(option.WithBaseURL(g.http.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	res, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].FinishReason != "stop" || !strings.Contains(res.Choices[0].Message.Content, "Paris") || res.Usage.TotalTokens == 0 {
		t.Errorf("completion %s", res.RawJSON())
	}

	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "other",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("please confirm")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "confirm",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"question": map[string]any{"type": "string"}}},
		})},
	})
	var acc openai.ChatCompletionAccumulator
	var finished []string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.Name)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("accumulated %+v", acc.ChatCompletion)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "confirm" || calls[0].ID == "" {
		t.Errorf("tool calls %+v", calls)
	}
	if strings.Join(finished, ",") != "confirm" {
		t.Errorf("the accumulator reported finished tool calls %v, want confirm", finished)
	}
}
