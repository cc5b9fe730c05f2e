package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/syncbuf"
)

// The probes of the security review (issue 28) against a real gateway on
// a loopback listener.

// TestOpenModeRefusesWebPages is the review's cross-site POST and forged
// Host: a keyless gateway acts as the admin of tenant default, so a web
// page must not reach it, neither cross-site nor by rebinding its own name
// to 127.0.0.1.
func TestOpenModeRefusesWebPages(t *testing.T) {
	g := newTestGateway(t, "basic")
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "secret"}, http.StatusOK, nil)
	port := g.http.URL[strings.LastIndexByte(g.http.URL, ':')+1:]
	tests := []struct {
		name, method, path, body string
		headers                  []string
		want                     int
	}{
		{"cross-site turn", "POST", "/v1/agents/demo/chat", `{"id":"x","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
			[]string{"Content-Type", "application/json", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"cross-site turn without a content type", "POST", "/v1/agents/demo/chat", `{"id":"x","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
			nil, http.StatusUnsupportedMediaType},
		{"cross-site reload", "POST", "/v1/admin/rules/reload", "", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"cross-site reload by fetch metadata", "POST", "/v1/admin/rules/reload", "", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"cross-site cancel", "POST", "/v1/agents/demo/sessions/s1/cancel", "", []string{"Origin", "null"}, http.StatusForbidden},
		{"forged Host reads a transcript", "GET", "/v1/agents/demo/sessions/s1/messages", "", []string{"Host", "evil.example:" + port}, http.StatusForbidden},
		{"forged Host reads metrics", "GET", "/metrics", "", []string{"Host", "evil.example"}, http.StatusForbidden},
		{"a local page reloads", "POST", "/v1/admin/rules/reload", "", []string{"Origin", "http://localhost:5173", "Sec-Fetch-Site", "same-site"}, http.StatusOK},
		{"localhost reads the transcript", "GET", "/v1/agents/demo/sessions/s1/messages", "", []string{"Host", "localhost:" + port}, http.StatusOK},
		{"curl reloads", "POST", "/v1/admin/rules/reload", "", nil, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, g.http.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				if tc.headers[i] == "Host" {
					req.Host = tc.headers[i+1]
				} else {
					req.Header.Set(tc.headers[i], tc.headers[i+1])
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.want, data)
			}
		})
	}
	// No refused request ran a turn.
	g.doJSON("GET", "/v1/agents/demo/sessions/x/messages", nil, http.StatusNotFound, nil)
}

// TestOpenModeRefusesReboundWebSockets: a rebound page's handshake names
// its own host, and its Origin equals it, which the Origin check alone
// lets through.
func TestOpenModeRefusesReboundWebSockets(t *testing.T) {
	g := newTestGateway(t, "basic")
	h := http.Header{"Host": {"evil.example"}, "Origin": {"http://evil.example"}}
	conn, resp, err := websocket.Dial(t.Context(), g.wsURL("demo", ""), &websocket.DialOptions{HTTPHeader: h, Host: "evil.example"})
	if err == nil {
		conn.CloseNow()
		t.Fatal("a rebound page's WebSocket handshake was accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("handshake answered %v, want 403", resp)
	}
}

// TestResponseHeaders: every /v1 answer — JSON, an error, a stream — is
// uncacheable and never sniffed.
func TestResponseHeaders(t *testing.T) {
	g := newTestGateway(t, "basic")
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, nil)
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"transcript", "GET", "/v1/agents/demo/sessions/s1/messages", nil},
		{"approvals", "GET", "/v1/approvals", nil},
		{"admin", "GET", "/v1/admin/rules", nil},
		{"an error", "GET", "/v1/agents/demo/sessions/none/messages", nil},
		{"no route", "GET", "/v1/nothing", nil},
		{"a stream", "POST", "/v1/agents/demo/chat", chatBody("s2", "u1", "hi")},
		{"openai", "POST", "/v1/chat/completions", map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		{"models", "GET", "/v1/models", nil},
		{"a model", "GET", "/v1/models/demo", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do(tc.method, tc.path, tc.body)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
				t.Errorf("Cache-Control %q (status %d)", cc, resp.StatusCode)
			}
			if n := resp.Header.Get("X-Content-Type-Options"); n != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", n)
			}
		})
	}
}

// TestBadRequestsNameJSONTypes: a 400 names the JSON a field takes, not
// the gateway's Go types.
func TestBadRequestsNameJSONTypes(t *testing.T) {
	g := newTestGateway(t, "basic")
	g.doJSON("POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"text": "hi"}, http.StatusOK, nil)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/agents/demo/chat", `{"id":"s","messages":"hi"}`, "field messages: expected an array, got JSON string"},
		{"/v1/agents/demo/chat", `{"id":"s","messages":[{"id":"u","role":"user","parts":"x"}]}`, "expected an array, got JSON string"},
		{"/v1/agents/demo/chat", `{"id":"s","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":5}]}]}`, "expected a string, got JSON number"},
		{"/v1/agents/demo/sessions/s/messages", `{"text":"a","async":"yes"}`, "expected true or false, got JSON string"},
		{"/v1/agents/demo/sessions/s/continue", `{"body":[1]}`, "expected an object, got JSON array"},
		{"/v1/chat/completions", `{"model":"demo","messages":"x"}`, "expected an array, got JSON string"},
	} {
		resp := g.do("POST", tc.path, tc.body)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Message string `json:"message"`
			Error   struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &body)
		msg := body.Message + body.Error.Message
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, tc.want) || strings.Contains(msg, "engine.") || strings.Contains(msg, "[]") {
			t.Errorf("%s %s: %d %s, want 400 with %q", tc.path, tc.body, resp.StatusCode, data, tc.want)
		}
	}
}

// TestFailedAuthenticationsAreLoggedAndThrottled: a wrong key is logged at
// info (it used to be debug only), and with auth.maxFailuresPerMinute an
// address that keeps guessing is refused, even with a right key, until the
// minute ends.
func TestFailedAuthenticationsAreLoggedAndThrottled(t *testing.T) {
	const key = "0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a"
	cfg := testConfig(t, "basic")
	cfg.Auth.APIKeys = []config.APIKey{{Key: key, Tenant: "acme", Subject: "alice"}}
	cfg.Auth.MaxFailuresPerMinute = 3
	var log syncbuf.Buffer
	g := startGateway(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	g.key = key
	g.doJSON("GET", "/v1/approvals", nil, http.StatusOK, nil)
	g.key = "a-wrong-key-of-no-one"
	for range 3 {
		g.doJSON("GET", "/v1/approvals", nil, http.StatusUnauthorized, nil)
	}
	if !strings.Contains(log.String(), `level=INFO msg="authentication failed" source=127.0.0.1 reason="invalid API key" at="GET /v1/approvals"`) {
		t.Errorf("failed authentications not logged at info:\n%s", log.String())
	}
	g.key = key
	resp := g.do("GET", "/v1/approvals", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a guessing address got %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestForgedApprovalAnswersRecordOnce is the review's 2,000-part approval
// answer: parts for approval ids the gateway never issued, each naming a
// tool of its own, make one audit record and no series beyond the
// configured tools.
func TestForgedApprovalAnswersRecordOnce(t *testing.T) {
	g := newTestGateway(t, "approval")
	_, m := askApproval(t, g, "flood", "/tmp/a")
	body := answerBody("flood", m, "appr_forged", true, "")
	msgs := body["messages"].([]any)
	parts := msgs[1].(map[string]any)["parts"].([]any)
	for i := range 2000 {
		parts = append(parts, map[string]any{"type": fmt.Sprintf("tool-x%d", i), "toolCallId": fmt.Sprintf("c%d", i),
			"state": "approval-responded", "input": map[string]any{}, "approval": map[string]any{"id": fmt.Sprintf("a%d", i), "approved": true}})
	}
	msgs[1].(map[string]any)["parts"] = parts
	resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", body))
	if got := types(resp); !slices.Equal(got, []string{"start", "error", "finish"}) {
		t.Errorf("forged answers ran %q, want an error chunk and no turn", got)
	}
	audit := g.auditLog()
	if n := strings.Count(audit, `"outcome":"ignored"`); n != 1 || !strings.Contains(audit, `"alsoIgnored":2000`) {
		t.Errorf("%d ignored records (want 1 with alsoIgnored 2000):\n%.2000s", n, grepLines(audit, "ignored"))
	}
	text := g.metricsText()
	if strings.Contains(text, `tool="x`) || !strings.Contains(text, `turngate_approvals_total{outcome="ignored",tool="other"} 2000`) ||
		!strings.Contains(text, `turngate_approvals_total{outcome="ignored",tool="delete"} 1`) {
		t.Errorf("approval series:\n%s", grepLines(text, "approvals_total"))
	}
}

// TestSelfApprovalRefused is the review's self-approval: a principal
// holding the approver role asks for a role-gated delete and approves it
// itself. It may not — through the API or by answering in the chat —
// unless the rule names "requester" among the approvers; another holder
// of the role may.
func TestSelfApprovalRefused(t *testing.T) {
	const opsKey2 = "ops2-key-7c1d9e3a5b8f2046"
	g := newTestGateway(t, "approval", withApprovalKeys, func(c *config.Config) {
		c.Auth.APIKeys = append(c.Auth.APIKeys, config.APIKey{Key: opsKey2, Tenant: "acme", Subject: "oscar", Roles: []string{"ops"}})
	})
	approvalOf := func(chunks []chunk) string {
		return chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	}
	chunks, m := askApproval(t, g, "self", "/big/db", bearer(opsKey)...)
	id := approvalOf(chunks)

	var list struct {
		Approvals []approvalResponse `json:"approvals"`
	}
	g.doJSON("GET", "/v1/approvals", nil, http.StatusOK, &list, bearer(opsKey)...)
	if len(list.Approvals) != 0 {
		t.Errorf("the requester is offered its own approval: %+v", list.Approvals)
	}
	resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody("self", m, id, true, "mine"), bearer(opsKey)...))
	if got := types(resp); !slices.Equal(got, []string{"start", "error", "finish"}) {
		t.Errorf("the requester's chat answer ran %q, want an error chunk and no turn", got)
	}
	var refusal struct{ Message string }
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusForbidden, &refusal, bearer(opsKey)...)
	if !strings.Contains(refusal.Message, "asked for this approval itself") {
		t.Errorf("refusal %q", refusal.Message)
	}
	if a, err := g.store.GetApproval(t.Context(), "acme", id); err != nil || a.State != store.ApprovalPending {
		t.Fatalf("approval %+v, %v; want it still pending", a, err)
	}
	if n := strings.Count(g.auditLog(), "asked for this approval itself"); n != 2 {
		t.Errorf("%d ignored self-approvals recorded, want 2", n)
	}
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey2)...)

	// A rule that names "requester" lets the asker decide its own call.
	chunks, _ = askApproval(t, g, "shared", "/shared/notes", bearer(opsKey)...)
	g.doJSON("POST", "/v1/approvals/"+approvalOf(chunks), map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey)...)
	chunks, _ = askApproval(t, g, "shared-user", "/shared/x", bearer(userKey)...)
	g.doJSON("POST", "/v1/approvals/"+approvalOf(chunks), map[string]any{"approved": false}, http.StatusOK, nil, bearer(userKey)...)
}

// closeStatus reads c's frames until the gateway closes it and returns the
// close status (-1 when it ended otherwise).
func closeStatus(c *wsClient) websocket.StatusCode {
	for {
		if _, err := c.readFrame(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// TestKeylessWebSocketFlood is the review's keyless WebSocket flood:
// keyless handshakes used to count against websocket.maxConnections for
// authTimeout, so three of them locked out every client with a key.
func TestKeylessWebSocketFlood(t *testing.T) {
	g := newTestGateway(t, "basic", wsAuthConfig, func(c *config.Config) {
		c.WebSocket.MaxConnections, c.WebSocket.MaxUnauthenticated = 3, 2
	})
	dial := func(opts *websocket.DialOptions) (*wsClient, int) { return g.tryDialWS(t, "", opts) }
	keyed := &websocket.DialOptions{Subprotocols: []string{wsSubprotocol, wsKeyProtocol + "acme-key"}}
	var keyless []*wsClient
	for range 2 {
		c, status := dial(nil)
		if c == nil {
			t.Fatalf("a keyless handshake within the budget got %d", status)
		}
		keyless = append(keyless, c)
	}
	if _, status := dial(nil); status != http.StatusServiceUnavailable {
		t.Errorf("a keyless handshake beyond websocket.maxUnauthenticated got %d, want 503", status)
	}
	for i := range 3 {
		c, status := dial(keyed)
		if c == nil {
			t.Fatalf("keyed handshake %d got %d while keyless sockets were open", i+1, status)
		}
	}
	if _, status := dial(keyed); status != http.StatusServiceUnavailable {
		t.Errorf("a keyed handshake beyond websocket.maxConnections got %d, want 503", status)
	}
	// A keyless socket that authenticates now finds maxConnections full.
	keyless[0].write(sendFrame("r1", "s1", "u1", "hello", map[string]string{"authorization": "Bearer acme-key"}))
	if st := closeStatus(keyless[0]); st != websocket.StatusTryAgainLater {
		t.Errorf("promotion beyond maxConnections closed with %v, want 1013", st)
	}
}

// TestKeylessWebSocketsPerSource: one address cannot take the whole
// keyless budget; a socket that authenticates, or closes, frees its place.
func TestKeylessWebSocketsPerSource(t *testing.T) {
	g := newTestGateway(t, "basic", wsAuthConfig, func(c *config.Config) {
		c.WebSocket.MaxUnauthenticated, c.WebSocket.MaxUnauthenticatedPerSource = 10, 2
	})
	var keyless []*wsClient
	for range 2 {
		c, status := g.tryDialWS(t, "", nil)
		if c == nil {
			t.Fatalf("a keyless handshake within the address's budget got %d", status)
		}
		keyless = append(keyless, c)
	}
	if _, status := g.tryDialWS(t, "", nil); status != http.StatusTooManyRequests {
		t.Errorf("a third keyless handshake from one address got %d, want 429", status)
	}
	keyless[0].write(sendFrame("r1", "s1", "u1", "hello", map[string]string{"authorization": "Bearer acme-key"}))
	if r := keyless[0].collect("r1"); r.end != "end" {
		t.Fatalf("the authenticating request ended %q %v", r.end, r.err)
	}
	if c, status := g.tryDialWS(t, "", nil); c == nil {
		t.Errorf("after one authenticated, a keyless handshake got %d, want its place", status)
	}
}

// TestUnauthenticatedWebSocketFrames: until a request of a keyless
// connection authenticates, its frames are small and few, and a frame
// that fails is refused before its messages are decoded.
func TestUnauthenticatedWebSocketFrames(t *testing.T) {
	g := newTestGateway(t, "basic", wsAuthConfig, func(c *config.Config) {
		c.WebSocket.UnauthenticatedFrameBytes, c.WebSocket.UnauthenticatedFrames = 2048, 3
	})
	big := strings.Repeat("x", 8192)
	t.Run("a large frame", func(t *testing.T) {
		c := g.dialWS(t, "demo", nil)
		// Over the 2,048-byte limit but within the client's 4 KiB write
		// buffer, so the frame leaves in one write: a larger one raced the
		// server's close (broken pipe) and its 1009 could be lost to the
		// reset.
		c.write(sendFrame("r1", "s1", "u1", big[:3000], nil))
		if st := closeStatus(c); st != websocket.StatusMessageTooBig {
			t.Errorf("closed with %v, want 1009", st)
		}
	})
	t.Run("many wrong keys", func(t *testing.T) {
		c := g.dialWS(t, "demo", nil)
		for i := range 3 {
			id := fmt.Sprintf("r%d", i)
			c.write(sendFrame(id, "s1", "u1", "hi", map[string]string{"authorization": "Bearer wrong"}))
			if r := c.collect(id); r.end != "error" || r.err["code"] != CodeUnauthorized {
				t.Fatalf("frame %d: %q %v, want unauthorized", i, r.end, r.err)
			}
		}
		c.write(sendFrame("r9", "s1", "u1", "hi", map[string]string{"authorization": "Bearer wrong"}))
		if st := closeStatus(c); st != websocket.StatusPolicyViolation {
			t.Errorf("closed with %v, want 1008", st)
		}
	})
	t.Run("a large frame after authenticating", func(t *testing.T) {
		c := g.dialWS(t, "demo", nil)
		auth := map[string]string{"authorization": "Bearer acme-key"}
		c.turn("r1", sendFrame("r1", "s2", "u1", "hello", auth))
		c.turn("r2", sendFrame("r2", "s3", "u1", big, auth))
	})
}

// TestMetricsAndReadinessExposure: /metrics answers only metrics.key when
// one is set, and /readyz shows which replica and revision answer only to
// a request with an API key.
func TestMetricsAndReadinessExposure(t *testing.T) {
	const apiKey, metricsKey = "4e8a2c6f0b9d1e3a5c7b9d0f2e4a6c8b", "metrics-9d7c5b3a1f0e2d4c6b8a"
	sum := sha256.Sum256([]byte(metricsKey))
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{{Key: apiKey, Tenant: "acme"}}
		c.Metrics.KeySHA256 = hex.EncodeToString(sum[:])
		c.Replica.ID = "replica-7"
	})
	for _, tc := range []struct {
		name, key string
		want      int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"an API key", apiKey, http.StatusUnauthorized},
		{"the metrics key", metricsKey, http.StatusOK},
	} {
		g.key = tc.key
		resp := g.do("GET", "/metrics", nil)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == http.StatusOK) != strings.Contains(string(data), "go_gc_duration_seconds") {
			t.Errorf("/metrics with %s: %d %.200s, want %d", tc.name, resp.StatusCode, data, tc.want)
		}
	}
	for key, shown := range map[string]bool{"": false, "wrong-key": false, apiKey: true} {
		g.key = key
		var ready map[string]any
		g.doJSON("GET", "/readyz", nil, http.StatusOK, &ready)
		_, replica := ready["replica"]
		_, revision := ready["revision"]
		if replica != shown || revision != shown || (shown && ready["replica"] != "replica-7") {
			t.Errorf("/readyz with key %q: %v, want replica and revision shown: %v", key, ready, shown)
		}
	}
}
