package gateway

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkChatTurn measures one whole chat turn over HTTP: decode, lock,
// persist the user message, a two-step scripted turn with a server tool
// under the rules, the UI stream, persist the answer.
func BenchmarkChatTurn(b *testing.B) {
	g := startGateway(b, testConfig(b, "basic"), Options{})
	b.ResetTimer()
	for i := range b.N {
		resp := g.do("POST", "/v1/agents/demo/chat", chatBody(fmt.Sprintf("s%d", i), "u1", "weather in Paris"))
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		resp.Body.Close()
	}
}
