// Command client is the WebSocket chat client of the websocket-chat
// example: it opens one connection to GET /v1/agents/{agent}/ws, sends one
// `send` frame per argument (request r1, r2, … at once, each on its own
// session), prints every frame the gateway answers on its own line and,
// when each request has ended, each request's text. A refused handshake exits 1 with the
// reason.
//
//	client -url ws://127.0.0.1:8080/v1/agents/files/ws -key KEY -auth subprotocol -session s1 "hello" "delete /etc/hosts"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func main() {
	addr := flag.String("url", "ws://127.0.0.1:8080/v1/agents/files/ws", "the agent's WebSocket URL")
	key := flag.String("key", "", "the API key")
	auth := flag.String("auth", "subprotocol", "how the key is sent: subprotocol (turngate.key.KEY) or query (?key=KEY)")
	session := flag.String("session", "ws-demo", "session id prefix: request rN runs on session PREFIX-N")
	flag.Parse()
	if err := run(*addr, *key, *auth, *session, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(addr, key, auth, session string, texts []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{Subprotocols: []string{"turngate.chat.v1"}}
	switch {
	case key == "":
	case auth == "subprotocol":
		opts.Subprotocols = append(opts.Subprotocols, "turngate.key."+key)
	case auth == "query":
		u, err := url.Parse(addr)
		if err != nil {
			return err
		}
		q := u.Query()
		q.Set("key", key)
		u.RawQuery = q.Encode()
		addr = u.String()
	default:
		return fmt.Errorf("-auth must be subprotocol or query, not %q", auth)
	}
	conn, resp, err := websocket.Dial(ctx, addr, opts)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("handshake refused: %s", resp.Status)
		}
		return err
	}
	defer conn.CloseNow()
	fmt.Printf("connected, subprotocol %q\n", conn.Subprotocol())

	for i, text := range texts {
		frame, _ := json.Marshal(map[string]any{
			"type":      "send",
			"requestId": fmt.Sprintf("r%d", i+1),
			"id":        fmt.Sprintf("%s-%d", session, i+1),
			"trigger":   "submit-message",
			"messages": []any{map[string]any{
				"id": fmt.Sprintf("m%d", i+1), "role": "user",
				"parts": []any{map[string]any{"type": "text", "text": text}},
			}},
		})
		if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
			return err
		}
	}
	text := map[string]string{} // each request's streamed text
	for open := len(texts); open > 0; {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		fmt.Println(string(data))
		var f struct {
			Type, RequestID string
			Chunk           struct{ Type, Delta string }
		}
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch {
		case f.Type == "end" || f.Type == "error":
			open--
		case f.Chunk.Type == "text-delta":
			text[f.RequestID] += f.Chunk.Delta
		case f.Chunk.Type == "text-end":
			text[f.RequestID] += " "
		}
	}
	for i := range texts {
		id := fmt.Sprintf("r%d", i+1)
		fmt.Printf("%s text: %s\n", id, strings.TrimSpace(text[id]))
	}
	return conn.Close(websocket.StatusNormalClosure, "")
}
