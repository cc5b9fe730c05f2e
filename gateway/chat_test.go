package gateway

import (
	"regexp"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

// msgIDs matches generated message ids in raw streams.
var msgIDs = regexp.MustCompile(`"messageId":"msg_[0-9a-f-]+"`)

func TestChatServerToolTurn(t *testing.T) {
	g := newTestGateway(t, "basic")
	chunks, raw := readUIStreamRaw(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "weather in Paris")))
	golden(t, "chat_weather.sse", msgIDs.ReplaceAll(raw, []byte(`"messageId":"<id>"`)))

	var out map[string]any
	for _, c := range chunks {
		if c.str("type") == "tool-output-available" {
			out, _ = c["output"].(map[string]any)
		}
	}
	if out["city"] != "Paris" {
		t.Errorf("tool output %v, want the weather of Paris", out)
	}
	msgs := g.history("demo", "s1")
	if len(msgs) != 2 || msgs[0].Role != engine.RoleUser || msgs[1].Role != engine.RoleAssistant {
		t.Fatalf("history = %+v, want user and assistant", msgs)
	}
	if msgs[1].ID != chunks[0].str("messageId") {
		t.Errorf("stored assistant id %q, stream start id %q", msgs[1].ID, chunks[0].str("messageId"))
	}
}

func TestChatBlockedAndRewrittenToolCalls(t *testing.T) {
	g := newTestGateway(t, "basic")
	tests := []struct {
		name, text string
		check      func(t *testing.T, chunks []chunk)
	}{
		{"blocked delete", "delete /etc/passwd", func(t *testing.T, chunks []chunk) {
			// A block is not executed; the model (and the client) see the
			// reason as the tool's output.
			for _, c := range chunks {
				if c.str("type") == "tool-output-available" {
					if out, _ := c["output"].(string); !strings.Contains(out, "delete is disabled") {
						t.Errorf("blocked call output %v, want the block reason", c["output"])
					}
					return
				}
			}
			t.Error("no tool output for the blocked call")
		}},
		{"rewritten search", "search for gophers", func(t *testing.T, chunks []chunk) {
			for _, c := range chunks {
				if c.str("type") == "tool-output-available" {
					out := c["output"].(map[string]any)
					if out["limit"] != float64(2) {
						t.Errorf("search ran with limit %v, want the rewritten 2", out["limit"])
					}
					return
				}
			}
			t.Error("no tool output for the search")
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s-"+string(rune('a'+i)), "u1", tc.text)))
			tc.check(t, chunks)
		})
	}
}

func hasType(chunks []chunk, typ string) bool {
	for _, c := range chunks {
		if c.str("type") == typ {
			return true
		}
	}
	return false
}
