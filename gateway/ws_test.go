package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// wsReadTimeout bounds one read of a test client, so that a broken
// gateway fails the test instead of hanging it.
const wsReadTimeout = 30 * time.Second

// wsClient is a real coder/websocket client of the gateway's WebSocket
// chat endpoint.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
	// pending keeps frames read for other requests than the one awaited.
	pending map[string][]map[string]any
}

// wsURL is the endpoint of agent with an optional query.
func (g *testGateway) wsURL(agent, query string) string {
	u := "ws" + strings.TrimPrefix(g.http.URL, "http") + "/v1/agents/" + agent + "/ws"
	if query != "" {
		u += "?" + query
	}
	return u
}

// dialWS opens a connection or fails the test.
func (g *testGateway) dialWS(t *testing.T, agent string, opts *websocket.DialOptions) *wsClient {
	t.Helper()
	conn, resp, err := websocket.Dial(context.Background(), g.wsURL(agent, ""), opts)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: status %d: %v", status, err)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, pending: map[string][]map[string]any{}}
}

// tryDialWS opens a connection to the demo agent with query, returning
// it and 101, or nil and the handshake's status.
func (g *testGateway) tryDialWS(t *testing.T, query string, opts *websocket.DialOptions) (*wsClient, int) {
	t.Helper()
	conn, resp, err := websocket.Dial(context.Background(), g.wsURL("demo", query), opts)
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, pending: map[string][]map[string]any{}}, http.StatusSwitchingProtocols
}

// write sends one frame: a value encoded as JSON, or raw text.
func (c *wsClient) write(v any) {
	c.t.Helper()
	data, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			c.t.Fatal(err)
		}
		data = string(b)
	}
	if err := c.conn.Write(context.Background(), websocket.MessageText, []byte(data)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads the next server frame.
func (c *wsClient) readFrame() (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wsReadTimeout)
	defer cancel()
	typ, data, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("server sent a binary frame")
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("server frame %s: %v", data, err)
	}
	return f, nil
}

// next returns the next frame of request id.
func (c *wsClient) next(id string) map[string]any {
	c.t.Helper()
	if q := c.pending[id]; len(q) > 0 {
		c.pending[id] = q[1:]
		return q[0]
	}
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("reading the frames of %s: %v", id, err)
		}
		rid, _ := f["requestId"].(string)
		if rid == id {
			return f
		}
		c.pending[rid] = append(c.pending[rid], f)
	}
}

// wsResult is what a request got: its chunks, and how it ended.
type wsResult struct {
	started bool
	chunks  []chunk
	end     string // end, error or no-active
	err     map[string]any
}

// collect reads request id's frames until it ends, checking that its
// sequences start at 0 and go up by one.
func (c *wsClient) collect(id string) wsResult {
	c.t.Helper()
	return c.collectFrom(id, 0)
}

// collectFrom is collect for a replay from chunk first on, whose sequences
// start at first.
func (c *wsClient) collectFrom(id string, first int) wsResult {
	c.t.Helper()
	var r wsResult
	for {
		f := c.next(id)
		switch f["type"] {
		case "start":
			if r.started || len(r.chunks) > 0 {
				c.t.Errorf("%s: start after the stream began", id)
			}
			r.started = true
		case "chunk":
			if seq, _ := f["sequence"].(float64); int(seq) != first+len(r.chunks) {
				c.t.Fatalf("%s: chunk sequence %v, want %d", id, f["sequence"], first+len(r.chunks))
			}
			m, _ := f["chunk"].(map[string]any)
			r.chunks = append(r.chunks, chunk(m))
		case "end", "no-active":
			r.end = f["type"].(string)
			return r
		case "error":
			r.end, r.err = "error", f
			return r
		default:
			c.t.Fatalf("%s: unknown frame %v", id, f)
		}
	}
}

// turn sends a send frame and collects its answer, which must be a
// complete UI message stream.
func (c *wsClient) turn(id string, frame map[string]any) []chunk {
	c.t.Helper()
	c.write(frame)
	r := c.collect(id)
	if r.end != "end" {
		c.t.Fatalf("%s ended with %s: %v", id, r.end, r.err)
	}
	checkUIStream(c.t, r.chunks)
	return r.chunks
}

// sendFrame is a WebSocketChatTransport send frame with one new user
// message, as the transport builds it.
func sendFrame(requestID, session, msgID, text string, headers map[string]string) map[string]any {
	if headers == nil {
		headers = map[string]string{}
	}
	return map[string]any{
		"type": "send", "requestId": requestID, "id": session, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": msgID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}},
		"headers":  headers, "body": map[string]any{},
	}
}

// resumeFrame is the transport's resume frame (it never sends lastSequence).
func resumeFrame(requestID, session string, headers map[string]string) map[string]any {
	if headers == nil {
		headers = map[string]string{}
	}
	return map[string]any{"type": "resume", "requestId": requestID, "id": session, "headers": headers, "body": map[string]any{}}
}

// withoutMessageIDs drops the generated ids, so that two turns' streams
// compare equal.
func withoutMessageIDs(chunks []chunk) string {
	b, _ := json.Marshal(chunks)
	return msgIDs.ReplaceAllString(string(b), `"messageId":"<id>"`)
}

// TestWSTurnsAreChatTurns: text and tool turns over WebSocket carry the very
// chunks POST chat streams, and store the same transcript.
func TestWSTurnsAreChatTurns(t *testing.T) {
	g := newTestGateway(t, "basic")
	c := g.dialWS(t, "demo", nil)
	for _, tc := range []struct{ name, text string }{
		{"text", "hello there"},
		{"server tool", "weather in Paris"},
		{"blocked tool", "delete /etc/passwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			tc.name = strings.ReplaceAll(tc.name, " ", "-")
			httpChunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("http-"+tc.name, "u1", tc.text)))
			wsChunks := c.turn("r-"+tc.name, sendFrame("r-"+tc.name, "ws-"+tc.name, "u1", tc.text, nil))
			if got, want := withoutMessageIDs(wsChunks), withoutMessageIDs(httpChunks); got != want {
				t.Errorf("WebSocket chunks differ from POST chat's:\n ws:   %s\n http: %s", got, want)
			}
			msgs := g.history("demo", "ws-"+tc.name)
			if len(msgs) != 2 || msgs[1].ID != wsChunks[0].str("messageId") {
				t.Fatalf("history = %+v, want the user message and the streamed assistant message", msgs)
			}
		})
	}
}

// TestWSMultiplexed: requests of several sessions interleave on one
// connection, each numbered from 0 in order.
func TestWSMultiplexed(t *testing.T) {
	g := newTestGateway(t, "basic")
	c := g.dialWS(t, "slow", nil)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		c.write(sendFrame(id, "s-"+id, "u1", "tell me a long story", nil))
	}
	for _, id := range ids {
		r := c.collect(id)
		if r.end != "end" || !r.started {
			t.Fatalf("%s: ended with %q (started %v): %v", id, r.end, r.started, r.err)
		}
		checkUIStream(t, r.chunks)
		if msgs := g.history("slow", "s-"+id); len(msgs) != 2 || !strings.Contains(textOf(msgs[1]), "nothing was ever lost") {
			t.Errorf("%s: history %+v", id, msgs)
		}
	}
}

// queued returns how many requests wait for key's turn lock.
func queued(s *Server, key string) int {
	s.locks.mu.Lock()
	defer s.locks.mu.Unlock()
	if l := s.locks.locks[key]; l != nil {
		return l.users - len(l.sem)
	}
	return 0
}

// TestWSResume: a resume replays the in-flight response from sequence 0
// and follows it to its end, on another connection; with nothing running
// it answers no-active.
func TestWSResume(t *testing.T) {
	g := newTestGateway(t, "basic")
	a := g.dialWS(t, "slow", nil)
	a.write(sendFrame("send", "s1", "u1", "tell me a long story", nil))
	// Wait until the turn has streamed a little.
	for {
		f := a.next("send")
		if f["type"] == "chunk" && f["chunk"].(map[string]any)["type"] == "text-delta" {
			break
		}
	}
	b := g.dialWS(t, "slow", nil)
	b.write(resumeFrame("resume", "s1", nil))
	replay := b.collect("resume")
	if replay.end != "end" || !replay.started {
		t.Fatalf("resume ended with %q: %v", replay.end, replay.err)
	}
	checkUIStream(t, replay.chunks)
	if replay.chunks[0].str("type") != "start" {
		t.Errorf("the replay does not start with the response's start chunk: %v", replay.chunks[0])
	}
	final := g.history("slow", "s1")
	if len(final) != 2 || replay.chunks[0].str("messageId") != final[1].ID {
		t.Errorf("replayed start %v, stored %+v", replay.chunks[0], final)
	}

	b.write(resumeFrame("again", "s1", nil))
	if r := b.collect("again"); r.end != "no-active" {
		t.Errorf("resume after the turn: %q %v, want no-active", r.end, r.err)
	}
	b.write(resumeFrame("missing", "nope", nil))
	if r := b.collect("missing"); r.end != "error" || r.err["code"] != CodeNotFound {
		t.Errorf("resume of a missing session: %q %v, want a not_found error", r.end, r.err)
	}
	b.write(map[string]any{"type": "resume", "requestId": "later", "id": "s1", "lastSequence": 5})
	if r := b.collect("later"); r.end != "no-active" {
		t.Errorf("resume with lastSequence after the turn: %q, want no-active", r.end)
	}
}

// TestWSAbort: an abort frame cancels the request's turn, which ends
// aborted with its partial message persisted, as POST …/cancel does.
func TestWSAbort(t *testing.T) {
	g := newTestGateway(t, "basic")
	c := g.dialWS(t, "slow", nil)
	c.write(sendFrame("r1", "s1", "u1", "tell me a long story", nil))
	for {
		f := c.next("r1")
		if f["type"] == "chunk" && f["chunk"].(map[string]any)["type"] == "text-delta" {
			break
		}
	}
	c.write(map[string]any{"type": "abort", "requestId": "r1"})
	waitFor(t, "the aborted turn to end", func() bool { return !g.srv.locks.busy(sessionKey("default", "s1")) })
	msgs := g.history("slow", "s1")
	if len(msgs) != 2 {
		t.Fatalf("history %+v, want the user message and the partial answer", msgs)
	}
	text := textOf(msgs[1])
	if text == "" || strings.Contains(text, "nothing was ever lost") {
		t.Errorf("stored text %q, want a partial story", text)
	}
	var meta map[string]any
	_ = json.Unmarshal(msgs[1].Metadata, &meta)
	if meta["interrupted"] != "aborted" {
		t.Errorf("stored metadata %v, want interrupted: aborted", meta)
	}
	// The connection serves the next request.
	c.turn("r2", sendFrame("r2", "s2", "u1", "hi", nil))
}

// wsAuthConfig has two tenants' keys.
func wsAuthConfig(cfg *config.Config) {
	cfg.Auth.APIKeys = []config.APIKey{
		{Key: "acme-key", Tenant: "acme", Subject: "a"},
		{Key: "globex-key", Tenant: "globex", Subject: "g"},
	}
}

func TestWSAuth(t *testing.T) {
	g := newTestGateway(t, "basic", wsAuthConfig)
	dial := func(query string, opts *websocket.DialOptions) (*wsClient, int) { return g.tryDialWS(t, query, opts) }
	bearer := func(key string) map[string]string { return map[string]string{"authorization": "Bearer " + key} }

	t.Run("subprotocol", func(t *testing.T) {
		c, status := dial("", &websocket.DialOptions{Subprotocols: []string{wsSubprotocol, wsKeyProtocol + "acme-key"}})
		if c == nil {
			t.Fatalf("status %d", status)
		}
		if c.conn.Subprotocol() != wsSubprotocol {
			t.Errorf("selected subprotocol %q, want %q (never the key)", c.conn.Subprotocol(), wsSubprotocol)
		}
		c.t = t
		c.turn("r1", sendFrame("r1", "acme-1", "u1", "hello", nil))
	})
	t.Run("key subprotocol alone", func(t *testing.T) {
		if _, status := dial("", &websocket.DialOptions{Subprotocols: []string{wsKeyProtocol + "acme-key"}}); status != http.StatusBadRequest {
			t.Errorf("status %d, want 400", status)
		}
	})
	t.Run("query", func(t *testing.T) {
		c, status := dial("key=acme-key", nil)
		if c == nil {
			t.Fatalf("status %d", status)
		}
		c.t = t
		c.turn("r1", sendFrame("r1", "acme-2", "u1", "hello", nil))
	})
	t.Run("authorization header", func(t *testing.T) {
		c, status := dial("", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer globex-key"}}})
		if c == nil {
			t.Fatalf("status %d", status)
		}
		c.t = t
		c.turn("r1", sendFrame("r1", "globex-1", "u1", "hello", nil))
	})
	t.Run("frame headers", func(t *testing.T) {
		c, _ := dial("", nil)
		c.t = t
		c.write(sendFrame("none", "acme-3", "u1", "hello", nil))
		if r := c.collect("none"); r.end != "error" || r.err["code"] != CodeUnauthorized {
			t.Errorf("a request without a key: %q %v, want unauthorized", r.end, r.err)
		}
		c.write(sendFrame("bad", "acme-3", "u1", "hello", bearer("wrong")))
		if r := c.collect("bad"); r.end != "error" || r.err["code"] != CodeUnauthorized || r.err["errorText"] != "invalid API key" {
			t.Errorf("a request with a wrong key: %q %v, want unauthorized", r.end, r.err)
		}
		c.turn("good", sendFrame("good", "acme-3", "u1", "hello", bearer("acme-key")))
	})
	t.Run("wrong handshake keys", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			opts  *websocket.DialOptions
		}{
			{"key=wrong", nil},
			{"", &websocket.DialOptions{Subprotocols: []string{wsSubprotocol, wsKeyProtocol + "wrong"}}},
			{"", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer wrong"}}}},
			{"", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Basic YTpi"}}}},
		} {
			if _, status := dial(tc.query, tc.opts); status != http.StatusUnauthorized {
				t.Errorf("%q %+v: status %d, want 401", tc.query, tc.opts, status)
			}
		}
	})
	t.Run("tenants", func(t *testing.T) {
		// globex cannot resume, continue or overwrite acme's session.
		c, _ := dial("key=globex-key", nil)
		c.t = t
		c.write(resumeFrame("r1", "acme-1", nil))
		if r := c.collect("r1"); r.end != "error" || r.err["code"] != CodeNotFound {
			t.Errorf("resume of another tenant's session: %q %v, want not_found", r.end, r.err)
		}
		c.turn("r2", sendFrame("r2", "acme-1", "u1", "mine now", nil))
		var out struct {
			Messages []engine.UIMessage `json:"messages"`
		}
		g.doJSON("GET", "/v1/agents/demo/sessions/acme-1/messages", nil, http.StatusOK, &out, "Authorization", "Bearer acme-key")
		if len(out.Messages) != 2 || textOf(out.Messages[0]) != "hello" {
			t.Errorf("acme's session changed: %+v", out.Messages)
		}
	})
	t.Run("unauthenticated connection times out", func(t *testing.T) {
		g := newTestGateway(t, "basic", wsAuthConfig, func(cfg *config.Config) { cfg.WebSocket.AuthTimeout = 50 * time.Millisecond })
		conn, _, err := websocket.Dial(context.Background(), g.wsURL("demo", ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		c := &wsClient{t: t, conn: conn}
		if _, err := c.readFrame(); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Errorf("read: %v, want a close with 1008", err)
		}
	})
}

func TestWSOrigin(t *testing.T) {
	g := newTestGateway(t, "basic", func(cfg *config.Config) { cfg.WebSocket.OriginPatterns = []string{"app.example.com"} })
	for origin, want := range map[string]int{
		"http://app.example.com":  http.StatusSwitchingProtocols,
		"http://evil.example.com": http.StatusForbidden,
		"":                        http.StatusSwitchingProtocols, // not a browser
	} {
		conn, resp, err := websocket.Dial(context.Background(), g.wsURL("demo", ""), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if err == nil {
			conn.CloseNow()
		}
		if resp == nil || resp.StatusCode != want {
			t.Errorf("origin %q: %v %v, want %d", origin, resp, err, want)
		}
	}
}

func TestWSLimits(t *testing.T) {
	t.Run("frame too large", func(t *testing.T) {
		g := newTestGateway(t, "basic", func(cfg *config.Config) { cfg.WebSocket.MaxFrameBytes = 1024 })
		c := g.dialWS(t, "demo", nil)
		c.write(sendFrame("r1", "s1", "u1", strings.Repeat("x", 2048), nil))
		if _, err := c.readFrame(); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("read after a too large frame: %v, want close 1009", err)
		}
	})
	t.Run("connections", func(t *testing.T) {
		g := newTestGateway(t, "basic", func(cfg *config.Config) { cfg.WebSocket.MaxConnections = 1 })
		c := g.dialWS(t, "demo", nil)
		_, resp, err := websocket.Dial(context.Background(), g.wsURL("demo", ""), nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a second connection: %v %v, want 503 with Retry-After", resp, err)
		}
		c.turn("r1", sendFrame("r1", "s1", "u1", "hello", nil))
	})
	t.Run("requests per connection", func(t *testing.T) {
		g := newTestGateway(t, "basic", func(cfg *config.Config) { cfg.WebSocket.MaxRequestsPerConnection = 1 })
		c := g.dialWS(t, "slow", nil)
		c.write(sendFrame("r1", "s1", "u1", "tell me a long story", nil))
		c.write(sendFrame("r2", "s2", "u1", "tell me a long story", nil))
		if r := c.collect("r2"); r.end != "error" || r.err["code"] != CodeTooManyRequests {
			t.Errorf("a second request: %q %v, want too_many_requests", r.end, r.err)
		}
		if r := c.collect("r1"); r.end != "end" {
			t.Errorf("the first request: %q %v", r.end, r.err)
		}
	})
	t.Run("turn lock", func(t *testing.T) {
		g := newTestGateway(t, "basic", func(cfg *config.Config) { cfg.Limits.MaxQueuedTurnsPerSession = 1 })
		c := g.dialWS(t, "slow", nil)
		c.write(sendFrame("r1", "s1", "u1", "tell me a long story", nil))
		c.next("r1") // start: the turn holds the lock
		c.write(sendFrame("r2", "s1", "u2", "queued", nil))
		waitFor(t, "the second request to queue", func() bool { return queued(g.srv, sessionKey("default", "s1")) == 1 })
		c.write(sendFrame("r3", "s1", "u3", "one too many", nil))
		if r := c.collect("r3"); r.end != "error" || r.err["code"] != CodeTooManyQueued || r.err["status"] != float64(429) || r.err["retryAfterMs"] == nil {
			t.Errorf("a request beyond the queue: %q %v, want 429 too_many_queued_turns", r.end, r.err)
		}
		for _, id := range []string{"r1", "r2"} {
			if r := c.collect(id); r.end != "end" {
				t.Errorf("%s: %q %v", id, r.end, r.err)
			}
		}
		c.write(sendFrame("r4", "s1", "u1", "tell me a long story", nil))
		if r := c.collect("r4"); r.end != "error" || r.err["code"] != CodeConflict {
			t.Errorf("an answered message again: %q %v, want 409 conflict", r.end, r.err)
		}
	})
}

// TestWSDeadPeer: a peer that stops answering pings is disconnected; the
// turn it started completes and is persisted.
func TestWSDeadPeer(t *testing.T) {
	g := newTestGateway(t, "basic", func(cfg *config.Config) {
		cfg.WebSocket.PingInterval = 20 * time.Millisecond
		cfg.WebSocket.PongTimeout = 20 * time.Millisecond
	})
	c := g.dialWS(t, "slow", nil)
	// The client never reads again, so it answers no ping.
	c.write(sendFrame("r1", "s1", "u1", "tell me a long story", nil))
	waitFor(t, "the dead peer to be disconnected", func() bool { return g.srv.ws.count() == 0 })
	waitFor(t, "the turn to end", func() bool { return !g.srv.locks.busy(sessionKey("default", "s1")) })
	msgs := g.history("slow", "s1")
	if len(msgs) != 2 || !strings.Contains(textOf(msgs[1]), "nothing was ever lost") {
		t.Fatalf("history %+v, want the whole story persisted", msgs)
	}
}

// TestWSSlowReader: a peer that does not read its stream holds up neither
// its own turn nor another connection's; it is disconnected once its send
// queue is full and a frame waits longer than websocket.writeTimeout.
func TestWSSlowReader(t *testing.T) {
	g := newTestGateway(t, "basic", func(cfg *config.Config) {
		cfg.WebSocket.SendQueue = 4
		cfg.WebSocket.WriteTimeout = 200 * time.Millisecond
	})
	// Tiny socket buffers on both ends, so that the kernel does not take
	// the whole stream on the slow client's behalf.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	small := httptest.NewUnstartedServer(g.srv.Handler())
	small.Listener = smallBuffers{ln}
	small.Start()
	t.Cleanup(small.Close)
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(small.URL, "http")+"/v1/agents/demo/ws",
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	slow := &wsClient{t: t, conn: conn}
	// An echo of 256 KiB streams as 16 K chunk frames, about 2 MB.
	long := strings.Repeat("abcdefgh", 32<<10)
	slow.write(sendFrame("r1", "slow", "u1", long, nil))

	fast := g.dialWS(t, "demo", nil)
	fast.turn("r1", sendFrame("r1", "fast", "u1", "weather in Rome", nil))

	waitFor(t, "the slow reader's turn to be persisted whole", func() bool {
		msgs, err := g.store.Messages(context.Background(), "default", "slow")
		return err == nil && len(msgs) == 2 && textOf(msgs[1]) == "Echo: "+long
	})
	waitFor(t, "the slow reader to be disconnected", func() bool { return g.srv.ws.count() == 1 })
	fast.turn("r2", sendFrame("r2", "fast", "u2", "hello", nil))
}

// smallBuffers accepts connections with a 4 KiB send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestWSMalformedFrames: every bad frame gets an error frame naming its
// request when it can, and the connection goes on.
func TestWSMalformedFrames(t *testing.T) {
	g := newTestGateway(t, "basic")
	c := g.dialWS(t, "demo", nil)
	for _, tc := range []struct {
		name, frame, requestID, want string
	}{
		{"not JSON", `{"type":`, "", "malformed JSON"},
		{"not an object", `["send"]`, "", "must be a JSON object"},
		{"no type", `{"requestId":"r1"}`, "r1", "field type"},
		{"unknown type", `{"type":"subscribe","requestId":"r2"}`, "r2", `not "subscribe"`},
		{"no requestId", `{"type":"send","id":"s1"}`, "", "field requestId"},
		{"requestId not a string", `{"type":"send","requestId":7}`, "", "field requestId"},
		{"send without messages", `{"type":"send","requestId":"r3","id":"s1","trigger":"submit-message","headers":{},"body":{}}`, "r3", "at least one message"},
		{"bad trigger", `{"type":"send","requestId":"r4","id":"s1","trigger":"go","messages":[{"id":"u","role":"user","parts":[]}]}`, "r4", "field trigger"},
		{"messages not an array", `{"type":"send","requestId":"r5","id":"s1","messages":{}}`, "r5", "field messages"},
		{"bad role", `{"type":"send","requestId":"r6","id":"s1","messages":[{"id":"u","role":"tool","parts":[]}]}`, "r6", "role"},
		{"headers not strings", `{"type":"send","requestId":"r7","id":"s1","headers":{"a":1}}`, "r7", "field headers"},
		{"body not an object", `{"type":"send","requestId":"r8","id":"s1","body":[1]}`, "r8", "field body"},
		{"bad session id", `{"type":"send","requestId":"r9","id":"../x","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"x"}]}]}`, "r9", "field id"},
		{"resume without id", `{"type":"resume","requestId":"r10"}`, "r10", "field id"},
		{"negative lastSequence", `{"type":"resume","requestId":"r11","id":"s1","lastSequence":-1}`, "r11", "field lastSequence"},
		{"invalid UTF-8", "{\"type\":\"send\",\"requestId\":\"r12\",\"id\":\"\xff\"}", "", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			c.write(tc.frame)
			f := c.next(tc.requestID)
			if f["type"] != "error" || !strings.Contains(f["errorText"].(string), tc.want) {
				t.Errorf("reply %v, want an error frame mentioning %q", f, tc.want)
			}
		})
	}
	c.t = t
	if err := c.conn.Write(context.Background(), websocket.MessageBinary, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if f := c.next(""); f["type"] != "error" || !strings.Contains(f["errorText"].(string), "text") {
		t.Errorf("reply to a binary frame %v", f)
	}
	// An abort of nothing gets no reply; the connection still serves.
	c.write(`{"type":"abort","requestId":"nothing"}`)
	c.turn("ok", sendFrame("ok", "s1", "u1", "hello", nil))
}

// TestWSShutdown: shutting down lets the streams end, then closes the
// connections with 1001.
func TestWSShutdown(t *testing.T) {
	g := newTestGateway(t, "basic")
	c := g.dialWS(t, "slow", nil)
	c.write(sendFrame("r1", "s1", "u1", "tell me a long story", nil))
	c.next("r1")
	done := make(chan error, 1)
	go func() { done <- g.shutdown(context.Background()) }()
	if r := c.collect("r1"); r.end != "end" {
		t.Errorf("the stream at shutdown ended with %q %v", r.end, r.err)
	}
	if _, err := c.readFrame(); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after the stream: %v, want close 1001", err)
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("shutdown: %v", err)
	}
}

// TestWSConnectionsGauge: turngate_websocket_connections counts the open
// connections.
func TestWSConnectionsGauge(t *testing.T) {
	g := newTestGateway(t, "basic")
	c1, c2 := g.dialWS(t, "demo", nil), g.dialWS(t, "demo", nil)
	waitFor(t, "two open connections counted", func() bool {
		return strings.Contains(g.metricsText(), "turngate_websocket_connections 2\n")
	})
	c1.conn.Close(websocket.StatusNormalClosure, "")
	c2.conn.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the closed connections uncounted", func() bool {
		return strings.Contains(g.metricsText(), "turngate_websocket_connections 0\n")
	})
}
