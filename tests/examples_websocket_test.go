package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// exampleWebsocketChat: over one WebSocket authenticated by a key
// subprotocol, a greeting and a delete under /etc/ run at once; the delete
// is blocked by the Rego rule and the model relays the reason. A wrong
// key is 401 before the upgrade.
func exampleWebsocketChat(t *testing.T, x *exampleRun) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "ws" + strings.TrimPrefix(x.URL, "http") + "/v1/agents/files/ws"
	_, resp, err := websocket.Dial(ctx, url+"?key=wrong", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: err %v, response %+v, want 401", err, resp)
	}
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols: []string{"turngate.chat.v1", "turngate.key.ws-demo-8d1ab145aaa8dd4bc74bd745d08a9630"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != "turngate.chat.v1" {
		t.Errorf("subprotocol %q, want turngate.chat.v1", conn.Subprotocol())
	}
	for i, text := range []string{"hello", "delete /etc/hosts"} {
		frame := fmt.Sprintf(`{"type":"send","requestId":"r%d","id":"ws-%d","trigger":"submit-message",`+
			`"messages":[{"id":"m%d","role":"user","parts":[{"type":"text","text":%q}]}]}`, i+1, i+1, i+1, text)
		if err := conn.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	text := map[string]string{}
	outputs := map[string]string{}
	for open := 2; open > 0; {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Type, RequestID, ErrorText string
			Chunk                      struct {
				Type, Delta string
				Output      json.RawMessage
			}
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("frame %s: %v", data, err)
		}
		switch {
		case f.Type == "error":
			t.Fatalf("request %s failed: %s", f.RequestID, f.ErrorText)
		case f.Type == "end":
			open--
		case f.Chunk.Type == "text-delta":
			text[f.RequestID] += f.Chunk.Delta
		case f.Chunk.Type == "tool-output-available":
			outputs[f.RequestID] = string(f.Chunk.Output)
		}
	}
	if text["r1"] != "Hello over the WebSocket." {
		t.Errorf("r1 text %q", text["r1"])
	}
	if outputs["r2"] != `"deleting /etc/hosts is not allowed"` {
		t.Errorf("r2 tool output %s, want the block reason", outputs["r2"])
	}
	if !strings.HasSuffix(text["r2"], "The delete tool said: deleting /etc/hosts is not allowed") {
		t.Errorf("r2 text %q does not relay the reason", text["r2"])
	}
}
