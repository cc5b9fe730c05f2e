package gateway

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
)

// BenchmarkChatTurn measures one whole chat turn over HTTP: decode, lock,
// persist the user message, a two-step scripted turn with a server tool
// under the rules, the UI stream, persist the answer.
func BenchmarkChatTurn(b *testing.B) {
	chatTurns(b, startGateway(b, testConfig(b, "basic"), Options{}))
}

// chatTurns runs b.N chat turns on g, each in a new session.
func chatTurns(b *testing.B, g *testGateway) {
	b.ResetTimer()
	for i := range b.N {
		resp := g.do("POST", "/v1/agents/demo/chat", chatBody(fmt.Sprintf("s%d", i), "u1", "weather in Paris"))
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		resp.Body.Close()
	}
}

// BenchmarkChatTurnAudit is BenchmarkChatTurn with the audit log on (lines
// encoded, then discarded), without and with the evaluated input in each
// decision record (audit.recordInput).
func BenchmarkChatTurnAudit(b *testing.B) {
	for _, record := range []bool{false, true} {
		b.Run(fmt.Sprintf("recordInput=%t", record), func(b *testing.B) {
			cfg := testConfig(b, "basic")
			cfg.Audit.Sink, cfg.Audit.RecordInput = config.SinkStdout, &record
			b.ReportAllocs()
			chatTurns(b, startGateway(b, cfg, Options{Audit: audit.New(io.Discard, nil, discardLogger())}))
		})
	}
}
