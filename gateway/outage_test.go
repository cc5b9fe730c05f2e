package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store/storetest"
	"github.com/turngate/turngate/internal/syncbuf"
)

// TestStoreOutage runs a gateway on a PostgreSQL server of the test's own,
// then stops it, and later freezes it (SIGSTOP): either way a request is
// answered 503 store_unavailable with Retry-After within store.timeout
// rather than hanging or failing with a 500, /readyz says the store is
// unavailable, a log line and turngate_store_up say so, and once the
// server is back (restarted, SIGCONT) the gateway serves again by itself
// and says that too. A turn whose store stops while it runs ends with an
// error chunk, not a finish that claims it. The times to the 503 and to recovery are logged
// (go test -v), not asserted: the machine may be busy.
func TestStoreOutage(t *testing.T) {
	pg := storetest.NewCluster(t)
	logs := &syncbuf.Buffer{}
	cfg := testConfig(t, "basic")
	cfg.Store = config.Store{Driver: config.StorePostgres, DSN: pg.DSN(), Timeout: time.Second}
	g := startGateway(t, cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	say := func(session string) *http.Response {
		return g.do("POST", "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": "hello"})
	}
	if resp := say("before"); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the outage: status %d", resp.StatusCode)
	}
	metric := func(name string) string {
		for line := range strings.Lines(g.metricsText()) {
			if strings.HasPrefix(line, name+" ") {
				return strings.TrimSpace(strings.TrimPrefix(line, name+" "))
			}
		}
		return ""
	}
	t.Run("stopped mid-turn", func(t *testing.T) {
		resp := g.do("POST", "/v1/agents/slow/chat", chatBody("mid-turn", "u1", "tell me a long story"))
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		readUntil(t, br, `"text-delta"`)
		pg.Stop()
		rest, _ := io.ReadAll(br)
		chunks := decodeSSE[chunk](t, bytes.NewReader(rest))
		n := len(chunks)
		if n < 2 || chunks[n-2].str("type") != "error" || chunks[n-1].str("type") != "finish" || chunks[n-1].str("finishReason") != "error" {
			t.Errorf("a turn whose store stopped mid-turn ends %v, want an error chunk, then finish with finishReason error", types(chunks))
		}
		pg.Start()
	})
	for _, tc := range []struct {
		name     string
		down, up func()
	}{
		{"stopped", pg.Stop, pg.Start},
		{"frozen", pg.Freeze, pg.Thaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.down()
			start := time.Now()
			wantStoreUnavailable(t, say("during-"+tc.name))
			toFailure := time.Since(start)

			// The OpenAI endpoint stores nothing of its turns: it serves
			// on, or, when a store call fails, says so as the SDKs retry.
			oai := g.do("POST", "/v1/chat/completions", map[string]any{"model": "demo",
				"messages": []any{map[string]any{"role": "user", "content": "hello"}}})
			oai.Body.Close()
			if oai.StatusCode != http.StatusOK && (oai.StatusCode != http.StatusServiceUnavailable ||
				oai.Header.Get("x-should-retry") != "true" || oai.Header.Get("Retry-After") == "") {
				t.Errorf("OpenAI endpoint during the outage: %d, x-should-retry %q, Retry-After %q; want 200, or a retryable 503",
					oai.StatusCode, oai.Header.Get("x-should-retry"), oai.Header.Get("Retry-After"))
			}
			t.Logf("OpenAI endpoint during the outage: %d", oai.StatusCode)

			resp := g.do("GET", "/readyz", nil)
			var ready struct {
				Ready  bool
				Checks map[string]string
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = json.Unmarshal(data, &ready)
			if resp.StatusCode != http.StatusServiceUnavailable || ready.Ready || ready.Checks["store"] == "ok" {
				t.Errorf("/readyz during the outage: %d %s, want 503 with the store not ok", resp.StatusCode, data)
			}
			if up := metric("turngate_store_up"); up != "0" {
				t.Errorf("turngate_store_up = %q during the outage, want 0", up)
			}
			if !strings.Contains(logs.String(), "store unavailable") {
				t.Errorf("no log line says the store is unavailable:\n%s", logs.String())
			}

			tc.up()
			start = time.Now()
			for i := 0; ; i++ {
				resp := say("after-" + tc.name)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				if resp.StatusCode != http.StatusServiceUnavailable || i == 600 {
					t.Fatalf("after the outage: status %d (attempt %d)", resp.StatusCode, i)
				}
				time.Sleep(100 * time.Millisecond)
			}
			toRecovery := time.Since(start)
			if up := metric("turngate_store_up"); up != "1" {
				t.Errorf("turngate_store_up = %q after the outage, want 1", up)
			}
			if !strings.Contains(logs.String(), "store available again") {
				t.Errorf("no log line says the store is available again")
			}
			t.Logf("store %s (store.timeout 1s): 503 store_unavailable after %v; served again %v after the server was back",
				tc.name, toFailure.Round(time.Millisecond), toRecovery.Round(time.Millisecond))
		})
	}
}
