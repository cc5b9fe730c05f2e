package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store/storefault"
)

// faultyGateway is a test gateway on cfg's real store, wrapped so that the
// test can make chosen store calls fail.
func faultyGateway(t *testing.T, mods ...func(*config.Config)) (*testGateway, *storefault.Faults) {
	t.Helper()
	cfg := testConfig(t, "basic")
	for _, m := range mods {
		m(cfg)
	}
	st, faults := storefault.Wrap(openTestStore(t, cfg))
	return startGateway(t, cfg, Options{Store: st}), faults
}

// wantStoreUnavailable checks that resp is the 503 store_unavailable a
// client retries.
func wantStoreUnavailable(t *testing.T, resp *http.Response) {
	t.Helper()
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct{ Code string }
	_ = json.Unmarshal(data, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Code != CodeStoreUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q, body %s; want 503 store_unavailable with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}
}

// auditedTurn returns the audit's turn record of request id.
func auditedTurn(t *testing.T, g *testGateway, id string) map[string]any {
	t.Helper()
	for line := range strings.Lines(g.auditLog()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["kind"] == "turn" && rec["requestId"] == id {
			return rec
		}
	}
	t.Fatalf("no audited turn %s in:\n%s", id, g.auditLog())
	return nil
}

// assistantMessages counts the assistant messages of a stored transcript.
func assistantMessages(msgs []engine.UIMessage) int {
	n := 0
	for _, m := range msgs {
		if m.Role == engine.RoleAssistant {
			n++
		}
	}
	return n
}

// TestFinalWriteFailureIsAFailedTurn: when the store fails the turn's final
// write (the assistant message and the turn record, one transaction) and
// its retries, no entry path acknowledges the turn: saveMessages answers
// 503 store_unavailable, the UI stream and the WebSocket send an error
// chunk before a finish with finishReason "error", the audit records the
// turn as an error, and the transcript holds no assistant message.
func TestFinalWriteFailureIsAFailedTurn(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		g, faults := faultyGateway(t, mod)
		stored := func(session string) {
			t.Helper()
			faults.Heal()
			if n := assistantMessages(g.history("demo", session)); n != 0 {
				t.Errorf("%s: %d assistant messages stored, want none", session, n)
			}
		}
		audited := func(id string) {
			t.Helper()
			rec := auditedTurn(t, g, id)
			if rec["status"] != engine.StatusError || rec["error"] != errNotStoredText {
				t.Errorf("audited turn %s: status %v, error %v; want error %q", id, rec["status"], rec["error"], errNotStoredText)
			}
		}
		endsInError := func(path string, chunks []chunk) {
			t.Helper()
			n := len(chunks)
			if n < 2 || chunks[n-2].str("type") != "error" || chunks[n-2].str("errorText") != errNotStoredText ||
				chunks[n-1].str("type") != "finish" || chunks[n-1].str("finishReason") != "error" {
				t.Errorf("%s: stream ends %v, want an error chunk %q, then finish with finishReason error", path, types(chunks), errNotStoredText)
			}
		}

		t.Run("saveMessages", func(t *testing.T) {
			faults.Fail("FinishTurn", 1, -1, storefault.Lost)
			wantStoreUnavailable(t, g.do("POST", "/v1/agents/demo/sessions/f1/messages", map[string]any{"text": "hello"}, "X-Request-Id", "req-f1"))
			if calls := faults.Calls("FinishTurn"); calls != 4 {
				t.Errorf("FinishTurn called %d times, want 4 (a write of unknown outcome is tried again: upsert by id under the turn's lock)", calls)
			}
			stored("f1")
			audited("req-f1")
		})
		t.Run("chat stream", func(t *testing.T) {
			faults.Fail("FinishTurn", 1, -1, storefault.Broken)
			chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("f2", "u1", "hello"), "X-Request-Id", "req-f2"))
			endsInError("chat", chunks)
			if calls := faults.Calls("FinishTurn"); calls != 1 {
				t.Errorf("FinishTurn called %d times, want 1 (a failure other than unavailability is not retried)", calls)
			}
			stored("f2")
			audited("req-f2")
		})
		t.Run("websocket", func(t *testing.T) {
			faults.Fail("FinishTurn", 1, -1, storefault.Lost)
			c := g.dialWS(t, "demo", nil)
			endsInError("websocket", c.turn("r1", sendFrame("r1", "f3", "u1", "hello", nil)))
			stored("f3")
		})
		t.Run("retried", func(t *testing.T) {
			// A failure that stored nothing for certain is tried again.
			faults.Fail("FinishTurn", 1, 2, storefault.Refused)
			var res turnResponse
			g.doJSON("POST", "/v1/agents/demo/sessions/f4/messages", map[string]any{"text": "hello"}, http.StatusOK, &res)
			if res.Status != engine.StatusCompleted {
				t.Errorf("status %q after two refused attempts, want completed", res.Status)
			}
			if n := assistantMessages(g.history("demo", "f4")); n != 1 {
				t.Errorf("%d assistant messages stored, want 1", n)
			}
		})
	})
}

// TestTurnWriteFailures: each other write of a turn failing on an
// unavailable store fails the turn on its entry path, stores no answer, and
// a durable submission whose writes failed runs again once its claim
// expires, and completes once the store is back.
func TestTurnWriteFailures(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		g, faults := faultyGateway(t, mod, func(cfg *config.Config) { cfg.Replica.LeaseTTL = 300 * time.Millisecond })

		t.Run("admission", func(t *testing.T) {
			faults.Fail("Admit", 1, -1, storefault.Lost)
			wantStoreUnavailable(t, g.do("POST", "/v1/agents/demo/sessions/w1/messages", map[string]any{"text": "hello"}))
			if calls := faults.Calls("Admit"); calls != 1 {
				t.Errorf("Admit called %d times, want 1 (appending a message of unknown outcome again could store it twice)", calls)
			}
			wantStoreUnavailable(t, g.do("POST", "/v1/agents/demo/chat", chatBody("w1", "u1", "hello")))
			c := g.dialWS(t, "demo", nil)
			c.write(sendFrame("r1", "w1", "u1", "hello", nil))
			if r := c.collect("r1"); r.end != "error" || r.err["code"] != CodeStoreUnavailable || r.err["retryAfterMs"] == nil {
				t.Errorf("WebSocket turn refused at admission: ended %s %v, want an error frame with code store_unavailable and retryAfterMs", r.end, r.err)
			}
			faults.Heal()
			resp := g.do("GET", "/v1/agents/demo/sessions/w1/messages", nil)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("the session of refused admissions: status %d, want 404 (never stored)", resp.StatusCode)
			}
		})
		t.Run("turn record", func(t *testing.T) {
			// A continuation with nothing to continue stores only its
			// turn record.
			faults.Fail("FinishTurn", 1, -1, storefault.Broken)
			wantStoreUnavailable := func(t *testing.T, resp *http.Response) { t.Helper(); resp.Body.Close() }
			wantStoreUnavailable(t, g.do("POST", "/v1/agents/demo/sessions/w2/messages", map[string]any{"text": "hello"}))
			faults.Fail("RecordTurn", 1, -1, storefault.Lost)
			wantStoreUnavailable(t, g.do("POST", "/v1/agents/demo/sessions/w2/continue", map[string]any{}))
			faults.Heal()
		})
		for _, tc := range []struct {
			name, op, text string
			// attempts is how many times a run tries the write.
			attempts int
		}{
			{"submission admission", "Admit", "hello", 1},
			{"submission tool journal", "JournalToolResult", "weather in Paris", 4},
			{"submission final write", "FinishTurn", "hello", 4},
		} {
			t.Run(tc.name, func(t *testing.T) {
				session := "sub-" + strings.ReplaceAll(tc.name, " ", "-")
				faults.Fail(tc.op, 1, -1, storefault.Lost)
				var sub submissionResponse
				g.doJSON("POST", "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": tc.text, "async": true}, http.StatusAccepted, &sub)
				waitFor(t, tc.op+" failing", func() bool { return faults.Calls(tc.op) >= tc.attempts })
				faults.Heal()
				done := waitSubmission(t, g, "demo", session, sub.SubmissionID)
				if done.Status != engine.StatusCompleted || done.Attempts < 2 {
					t.Errorf("submission %s after attempt %d, want completed by a later attempt", done.Status, done.Attempts)
				}
				if n := assistantMessages(g.history("demo", session)); n != 1 {
					t.Errorf("%d assistant messages stored, want 1", n)
				}
			})
		}
	})
}

// TestStoreUnavailableAnswers: a store call that failed because the store
// is unavailable is answered 503 store_unavailable with Retry-After, on the
// OpenAI endpoint with x-should-retry: true and OpenAI's error body.
func TestStoreUnavailableAnswers(t *testing.T) {
	g := newTestGateway(t, "basic")
	err := fmt.Errorf("loading transcript: %w", storefault.Lost("Transcript"))
	for _, format := range []string{"", formatOpenAI} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest("POST", "/v1/chat/completions", nil)
		if format != "" {
			c.Set(errorFormatKey, format)
		}
		g.srv.writeError(c, err)
		body := w.Body.String()
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(body, `"code":"store_unavailable"`) {
			t.Errorf("format %q: %d, Retry-After %q, body %s; want 503 store_unavailable with Retry-After", format, w.Code, w.Header().Get("Retry-After"), body)
		}
		if format == formatOpenAI && (w.Header().Get("x-should-retry") != "true" || !strings.Contains(body, `"type":"server_error"`)) {
			t.Errorf("OpenAI endpoint: x-should-retry %q, body %s; want true and a server_error", w.Header().Get("x-should-retry"), body)
		}
	}
}
