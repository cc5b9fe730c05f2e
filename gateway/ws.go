package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/httpguard"
	"github.com/turngate/turngate/gateway/uistream"
)

// WebSocket chat (GET /v1/agents/:agent/ws) speaks the protocol of the ai
// package's WebSocketChatTransport (protocols.md A.14): one connection
// carries many requests, each a send (a chat turn, as POST chat) or a
// resume (a replay of the session's in-flight response, as GET
// …/chat/:id/stream), correlated by the client's requestId. Turns run as
// they do for POST chat, on contexts detached from the connection: a
// connection that dies only stops its copies of the streams.

// Handshake authentication for browsers, which cannot set the
// Authorization header: the key rides in a subprotocol next to
// wsSubprotocol, or in the query parameter wsKeyParam.
const (
	// wsSubprotocol is the subprotocol the gateway selects. A client that
	// offers a key subprotocol must offer it too: a browser fails a
	// handshake that selects none of the offered subprotocols, and the
	// gateway never echoes the key.
	wsSubprotocol = "turngate.chat.v1"
	// wsKeyProtocol prefixes the API key offered as a subprotocol.
	wsKeyProtocol = "turngate.key."
	// wsKeyParam is the query parameter that may carry the API key; the
	// gateway removes it from the request URL before anything can log it.
	wsKeyParam = "key"
)

// wsShutdownGrace bounds how long Shutdown lets WebSocket connections send
// the last frames of their turns' streams before closing them.
const wsShutdownGrace = 2 * time.Second

// chatWebSocket serves GET /v1/agents/:agent/ws.
func (s *Server) chatWebSocket(c *gin.Context) error {
	ag, err := s.agentOf(c)
	if err != nil {
		return err
	}
	hs, authed, err := s.wsHandshakeAuth(c.Request)
	if err != nil {
		return err
	}
	if s.closing.Load() {
		return errShuttingDown
	}
	w := &wsConn{s: s, ag: ag, cfg: s.conf().WebSocket, hs: hs, source: httpguard.Source(c.Request), reqs: map[string]*wsRequest{},
		goAway: make(chan struct{})}
	w.authed.Store(authed)
	if err := s.ws.add(w, w.cfg, authed); err != nil {
		return err
	}
	defer s.ws.remove(w)
	conn, err := websocket.Accept(c.Writer, c.Request, &websocket.AcceptOptions{
		Subprotocols:   []string{wsSubprotocol},
		OriginPatterns: w.cfg.OriginPatterns,
	})
	if err != nil {
		// Accept has answered (403 for a foreign Origin, 4xx for a bad
		// handshake).
		s.log.Debug("websocket handshake refused", "requestId", requestID(c), "err", err)
		return nil
	}
	s.metrics.WebSocketConnections.Inc()
	defer s.metrics.WebSocketConnections.Dec()
	w.conn = conn
	w.ctx, w.cancel = context.WithCancel(s.baseCtx)
	w.out = make(chan []byte, w.cfg.SendQueue)
	w.serve()
	return nil
}

// wsHandshake is the credential a handshake authenticated with: its
// principal, when it stops authenticating (a JWT's exp; zero for an API
// key), and what to authenticate it again with after a config reload.
type wsHandshake struct {
	principal engine.Principal
	expires   time.Time
	cred      heldCredential
	// auth is the live authenticator it was last authenticated by (nil
	// on a gateway without keys).
	auth *authenticator
}

// wsHandshakeAuth authenticates a handshake by its Authorization header,
// its key subprotocol or its key query parameter, in that order. A
// handshake without a key is let in unauthenticated (authed false): its
// requests must then carry headers.authorization. A key that is wrong is a
// 401 before the upgrade.
func (s *Server) wsHandshakeAuth(r *http.Request) (hs wsHandshake, authed bool, err error) {
	key, hasKey := "", false
	if q := r.URL.Query(); q.Has(wsKeyParam) {
		key, hasKey = q.Get(wsKeyParam), true
		q.Del(wsKeyParam)
		r.URL.RawQuery = q.Encode()
	}
	offered := wsOfferedProtocols(r)
	for _, proto := range offered {
		if k, ok := strings.CutPrefix(proto, wsKeyProtocol); ok {
			if !slices.Contains(offered, wsSubprotocol) {
				return hs, false, errBadRequest("a %sKEY subprotocol must be offered with the %s subprotocol, which the gateway selects", wsKeyProtocol, wsSubprotocol)
			}
			key, hasKey = k, true
		}
	}
	if s.auth().open() {
		return wsHandshake{principal: anonymous}, true, nil
	}
	if err := s.throttled(r); err != nil {
		return hs, false, err
	}
	switch h := r.Header.Get("Authorization"); {
	case h != "":
		key, err = bearerKey(h)
	case !hasKey:
		return hs, false, nil
	}
	if err == nil {
		hs.cred, hs.auth = newHeldCredential(key), s.auth()
		hs.principal, hs.expires, err = s.verify(r.Context(), hs.cred)
	}
	if err != nil {
		s.authFailed(r.Context(), httpguard.Source(r), err, "WebSocket handshake")
	}
	return hs, err == nil, err
}

// wsOfferedProtocols lists the handshake's Sec-WebSocket-Protocol values.
func wsOfferedProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// wsHub tracks the open connections, for websocket.maxConnections and
// websocket.maxUnauthenticated, and for Shutdown.
type wsHub struct {
	mu sync.Mutex
	// conns are the open connections; authed counts those that count
	// against maxConnections (authenticated by the handshake or by a
	// request), the rest against maxUnauthenticated.
	conns  map[*wsConn]bool
	authed int
	// keyless counts the keyless connections of each source
	// (httpguard.SourceKey), for websocket.maxUnauthenticatedPerSource.
	keyless map[string]int
	closing bool
	// open counts the connections; Add happens under mu and never once
	// closing is set, so it never races shutdown's Wait.
	open sync.WaitGroup
}

// errWSFull is the 503 of a handshake or a first authenticated request
// beyond websocket.maxConnections.
func errWSFull(max int) error {
	ae := errorf(http.StatusServiceUnavailable, CodeUnavailable,
		"all %d WebSocket connections (websocket.maxConnections) are in use; retry later", max)
	ae.RetryAfter = time.Second
	return ae
}

// add counts w, authenticated or not, unless its budget is used up or
// shutdown began.
func (h *wsHub) add(w *wsConn, cfg config.WebSocket, authed bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closing:
		return errShuttingDown
	case authed && h.authed >= cfg.MaxConnections:
		return errWSFull(cfg.MaxConnections)
	case !authed && len(h.conns)-h.authed >= cfg.MaxUnauthenticated:
		ae := errorf(http.StatusServiceUnavailable, CodeUnavailable,
			"all %d WebSocket connections without a key (websocket.maxUnauthenticated) are in use; authenticate the handshake or retry later", cfg.MaxUnauthenticated)
		ae.RetryAfter = time.Second
		return ae
	case !authed && h.keyless[httpguard.SourceKey(w.source)] >= cfg.MaxUnauthenticatedPerSource:
		ae := errorf(http.StatusTooManyRequests, CodeTooManyRequests,
			"this address holds %d WebSocket connections without a key (websocket.maxUnauthenticatedPerSource); authenticate the handshake or retry later", cfg.MaxUnauthenticatedPerSource)
		ae.RetryAfter = time.Second
		return ae
	}
	if h.conns == nil {
		h.conns, h.keyless = map[*wsConn]bool{}, map[string]int{}
	}
	h.conns[w] = authed
	if authed {
		h.authed++
	} else {
		h.keyless[httpguard.SourceKey(w.source)]++
	}
	h.open.Add(1)
	return nil
}

// promote moves w, whose request just authenticated, from the keyless
// budget to maxConnections; false when those are all in use.
func (h *wsHub) promote(w *wsConn, max int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if authed, ok := h.conns[w]; !ok || authed {
		return ok
	}
	if h.authed >= max {
		return false
	}
	h.conns[w] = true
	h.authed++
	h.forgetKeyless(w)
	return true
}

// forgetKeyless takes w off its source's keyless count; mu is held.
func (h *wsHub) forgetKeyless(w *wsConn) {
	k := httpguard.SourceKey(w.source)
	if h.keyless[k]--; h.keyless[k] <= 0 {
		delete(h.keyless, k)
	}
}

func (h *wsHub) remove(w *wsConn) {
	h.mu.Lock()
	if authed, ok := h.conns[w]; ok && authed {
		h.authed--
	} else if ok {
		h.forgetKeyless(w)
	}
	delete(h.conns, w)
	h.mu.Unlock()
	h.open.Done()
}

// count returns the number of open connections.
func (h *wsHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// shutdown refuses new connections and closes the open ones with 1001
// (going away) once their requests have sent their last frames, or at
// once when ctx ends first. It runs after the turns have ended.
func (h *wsHub) shutdown(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	conns := make([]*wsConn, 0, len(h.conns))
	for w := range h.conns {
		conns = append(conns, w)
	}
	h.mu.Unlock()
	for _, w := range conns {
		w.drain()
	}
	done := make(chan struct{})
	go func() { h.open.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, w := range conns {
			w.stop()
		}
		<-done
	}
}

// wsConn is one WebSocket connection: a read loop (this handler's
// goroutine), a write loop that owns the socket's writes, a ping loop, and
// a goroutine per request.
type wsConn struct {
	s    *Server
	ag   *agent
	cfg  config.WebSocket
	conn *websocket.Conn
	// hs is the handshake's credential, when authed was set by it; the
	// read loop rechecks it after its expiry or a config reload.
	hs wsHandshake
	// source is the client's address (httpguard.Source).
	source string
	// authed is set when the handshake or any request authenticated.
	authed    atomic.Bool
	handshake bool
	// revoked is set (read loop only) when the handshake's credential no
	// longer authenticates: the connection closes after its error frame.
	revoked bool
	// unauthFrames counts the frames read before one authenticated (read
	// loop only).
	unauthFrames int

	ctx    context.Context
	cancel context.CancelFunc
	// out is the bounded send queue. Request goroutines wait for room in
	// it (never the turns, which append to their buffers); the read loop
	// does not wait, and a peer too slow to make room for its replies is
	// disconnected.
	out chan []byte
	// goAway, closed once at shutdown when no request is left, makes the
	// write loop send what is queued and close with 1001.
	goAway     chan struct{}
	goAwayOnce sync.Once

	mu       sync.Mutex
	reqs     map[string]*wsRequest
	draining bool
	requests sync.WaitGroup
}

// wsRequest is one send or resume in flight on a connection.
type wsRequest struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// cancelTurn cancels the request's turn (nil until it has one).
	cancelTurn func()
	aborted    bool
}

// serve runs the connection until the peer closes it, it fails, or it is
// closed for a limit; then it waits for its goroutines.
func (w *wsConn) serve() {
	defer w.conn.CloseNow()
	w.handshake = w.authed.Load()
	if w.handshake {
		w.conn.SetReadLimit(w.cfg.MaxFrameBytes)
	} else {
		w.conn.SetReadLimit(min(w.cfg.UnauthenticatedFrameBytes, w.cfg.MaxFrameBytes))
	}
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); w.writeLoop() }()
	go w.pingLoop()
	if !w.handshake {
		timer := time.AfterFunc(w.cfg.AuthTimeout, func() {
			if !w.authed.Load() {
				w.closeWith(websocket.StatusPolicyViolation, "no authenticated request within websocket.authTimeout")
			}
		})
		defer timer.Stop()
	}
	w.readLoop()
	w.cancel()
	w.requests.Wait()
	<-writerDone
}

// readLoop reads and dispatches client frames until the connection ends.
func (w *wsConn) readLoop() {
	for {
		typ, data, err := w.conn.Read(w.ctx)
		if err != nil {
			if status := websocket.CloseStatus(err); status == websocket.StatusMessageTooBig {
				w.s.log.Debug("websocket frame too large", "agent", w.ag.name, "limit", w.cfg.MaxFrameBytes)
			}
			return
		}
		if typ != websocket.MessageText {
			w.reply(wsErrorFrame("", errorf(http.StatusBadRequest, CodeInvalidJSON, "frames must be text messages holding JSON")))
			if !w.authed.Load() && !w.unauthenticatedFrame() {
				return
			}
			continue
		}
		if !w.authed.Load() && !w.authenticateFrame(data) {
			if !w.unauthenticatedFrame() {
				return
			}
			continue
		}
		f, err := decodeWSFrame(data, w.s.conf().Limits.MaxMessages)
		if err != nil {
			w.reply(wsErrorFrame(f.RequestID, err))
			continue
		}
		w.dispatch(f)
	}
}

// authenticateFrame authenticates the frame of a connection that has not
// authenticated yet, from its requestId and headers alone: the rest (the
// messages) is not decoded for a frame that fails (its 401 is replied).
// The first frame that authenticates moves the connection into
// websocket.maxConnections (or, when those are in use, is answered 503 and
// the connection closed) and lifts the frame cap to maxFrameBytes.
func (w *wsConn) authenticateFrame(data []byte) bool {
	var head struct {
		RequestID string            `json:"requestId"`
		Headers   map[string]string `json:"headers"`
	}
	_ = json.Unmarshal(data, &head)
	if len(head.RequestID) > maxRequestIDLen {
		head.RequestID = ""
	}
	if _, err := w.requestPrincipal(wsLowerKeys(head.Headers)); err != nil {
		w.reply(wsErrorFrame(head.RequestID, err))
		return false
	}
	if !w.s.ws.promote(w, w.cfg.MaxConnections) {
		w.reply(wsErrorFrame(head.RequestID, errWSFull(w.cfg.MaxConnections)))
		w.closeWith(websocket.StatusTryAgainLater, "all websocket.maxConnections are in use")
		return false
	}
	w.conn.SetReadLimit(w.cfg.MaxFrameBytes)
	return true
}

// unauthenticatedFrame counts a frame that did not authenticate; false
// (and the connection closed with 1008) past websocket.unauthenticatedFrames.
func (w *wsConn) unauthenticatedFrame() bool {
	w.unauthFrames++
	if w.unauthFrames <= w.cfg.UnauthenticatedFrames {
		return true
	}
	w.closeWith(websocket.StatusPolicyViolation, "too many frames without an authenticated request (websocket.unauthenticatedFrames)")
	return false
}

// dispatch starts a send or resume request, or aborts one.
func (w *wsConn) dispatch(f *wsFrame) {
	if f.Type == wsAbort {
		w.mu.Lock()
		r := w.reqs[f.RequestID]
		w.mu.Unlock()
		if r != nil {
			r.abort()
		}
		return
	}
	p, err := w.requestPrincipal(f.Headers)
	if err != nil {
		if w.revoked {
			// Written before the close, not queued behind it.
			w.write(wsErrorFrame(f.RequestID, err))
			w.closeWith(websocket.StatusPolicyViolation, "the credential this connection authenticated with no longer authenticates: reconnect")
			return
		}
		w.reply(wsErrorFrame(f.RequestID, err))
		return
	}
	r, err := w.register(f.RequestID)
	if err != nil {
		w.reply(wsErrorFrame(f.RequestID, err))
		return
	}
	go func() {
		defer w.unregister(r)
		var err error
		if f.Type == wsSend {
			err = w.runSend(r, f, p)
		} else {
			err = w.runResume(r, f, p)
		}
		if err != nil && r.ctx.Err() == nil {
			w.send(r, wsErrorFrame(r.id, err))
		}
	}()
}

// requestPrincipal authenticates a request: by its headers.authorization
// when it has one, else as the handshake's principal.
func (w *wsConn) requestPrincipal(h map[string]string) (engine.Principal, error) {
	if w.s.auth().open() {
		return anonymous, nil
	}
	if a, ok := h["authorization"]; ok {
		p, err := w.s.bearerPrincipal(w.ctx, a)
		if err != nil {
			w.s.authFailed(w.ctx, w.source, err, "WebSocket request")
			return p, err
		}
		w.authed.Store(true)
		return p, nil
	}
	if w.handshake {
		return w.handshakePrincipal()
	}
	return engine.Principal{}, errorf(http.StatusUnauthorized, CodeUnauthorized,
		"missing API key: authenticate the handshake (subprotocol %sKEY, ?%s=KEY or an Authorization header) or send headers.authorization", wsKeyProtocol, wsKeyParam)
}

// handshakePrincipal is the principal of the handshake's credential. Past
// the credential's expiry, or once a config reload replaced the
// authenticator, it authenticates it again (read loop only); a refusal
// (token_expired, a removed key's unauthorized) ends the connection:
// the caller replies the error frame, and the connection then closes with
// 1008.
func (w *wsConn) handshakePrincipal() (engine.Principal, error) {
	auth := w.s.auth()
	if auth == w.hs.auth && (w.hs.expires.IsZero() || time.Now().Before(w.hs.expires)) {
		return w.hs.principal, nil
	}
	p, exp, err := w.s.verify(w.ctx, w.hs.cred)
	if err != nil {
		w.s.authFailed(w.ctx, w.source, err, "WebSocket request")
		if toAPIError(err).Status < http.StatusInternalServerError {
			w.revoked = true
		}
		return p, err
	}
	w.hs.principal, w.hs.expires, w.hs.auth = p, exp, auth
	return p, nil
}

// register adds a request, refusing a requestId in use and one request
// beyond websocket.maxRequestsPerConnection.
func (w *wsConn) register(id string) (*wsRequest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.draining:
		return nil, errShuttingDown
	case w.reqs[id] != nil:
		return nil, errorf(http.StatusConflict, CodeConflict, "request %q is already in flight on this connection", id)
	case len(w.reqs) >= w.cfg.MaxRequestsPerConnection:
		ae := errorf(http.StatusTooManyRequests, CodeTooManyRequests,
			"%d requests are in flight on this connection (websocket.maxRequestsPerConnection); wait for one to end", len(w.reqs))
		ae.RetryAfter = time.Second
		return nil, ae
	}
	r := &wsRequest{id: id}
	r.ctx, r.cancel = context.WithCancel(w.ctx)
	w.reqs[id] = r
	w.requests.Add(1)
	return r, nil
}

// unregister removes r; at shutdown, the last one lets the connection go.
func (w *wsConn) unregister(r *wsRequest) {
	r.cancel()
	w.mu.Lock()
	delete(w.reqs, r.id)
	last := w.draining && len(w.reqs) == 0
	w.mu.Unlock()
	if last {
		w.goAwayOnce.Do(func() { close(w.goAway) })
	}
	w.requests.Done()
}

// drain refuses new requests and closes the connection with 1001 once the
// requests in flight have ended.
func (w *wsConn) drain() {
	w.mu.Lock()
	w.draining = true
	idle := len(w.reqs) == 0
	w.mu.Unlock()
	if idle {
		w.goAwayOnce.Do(func() { close(w.goAway) })
	}
}

// stop ends the connection at once.
func (w *wsConn) stop() { w.cancel() }

// runSend runs a send: the chat turn of POST chat, streamed as chunk frames.
func (w *wsConn) runSend(r *wsRequest, f *wsFrame, p engine.Principal) error {
	rid := f.Headers["x-request-id"]
	if !validID(rid) {
		rid = newID("req_")
	}
	t, err := w.s.startChat(r.ctx, w.ag, p, rid, f.Chat)
	if err != nil {
		return err
	}
	r.attach(t.cancel)
	w.follow(r, t.buf, 0)
	return nil
}

// runResume replays the session's in-flight response from chunk f.From on
// (0: from its start), then follows it; no-active when none runs. A turn
// running on another replica is replayed from its stream relayed through
// the database, numbered the same.
func (w *wsConn) runResume(r *wsRequest, f *wsFrame, p engine.Principal) error {
	t, err := w.s.activeTurn(r.ctx, w.ag, p.Tenant, f.SessionID)
	if err != nil {
		return err
	}
	if t == nil && w.s.rep != nil {
		if ok, err := w.resumeRelayed(r, f, p.Tenant); ok || err != nil {
			return err
		}
	}
	if t == nil {
		w.send(r, wsControlFrame("no-active", r.id))
		return nil
	}
	if f.From > t.buf.Len() {
		return errLastSequence(t.buf.Len())
	}
	r.attach(t.cancel)
	w.follow(r, t.buf, f.From)
	return nil
}

// errLastSequence refuses a resume whose lastSequence is beyond the n
// chunks of the response.
func errLastSequence(n int) error {
	return errField("lastSequence", "is beyond the %d chunks of the response", n)
}

// resumeRelayed replays the tenant's session's response relayed by the
// replica that runs its turn, as follow replays an in-process one; an
// abort cancels that turn as POST …/sessions/:id/cancel would, by the
// lease token of the turn it replays, so an abort racing that turn's end
// does not cancel the session's next turn. It reports false, having sent
// nothing, when no turn runs.
func (w *wsConn) resumeRelayed(r *wsRequest, f *wsFrame, tenant string) (bool, error) {
	out := &wsRelay{w: w, r: r, prefix: wsChunkPrefix(r.id), from: f.From}
	ok, err := w.s.rep.resume(r.ctx, out, tenant, f.SessionID, func(token int64) {
		r.attach(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), persistTimeout)
			defer cancel()
			if _, err := w.s.rep.cancelRemote(ctx, tenant, f.SessionID, token); err != nil {
				w.s.log.Error("cancelling a turn of another replica", "session", f.SessionID, "err", err)
			}
		})
	})
	if !ok || err != nil || r.ctx.Err() != nil {
		r.attach(nil)
		return ok, err
	}
	switch {
	case out.next < out.from:
		return true, errLastSequence(out.next)
	case !out.started && !w.send(r, wsControlFrame("start", r.id)):
		return true, nil
	}
	w.send(r, wsControlFrame("end", r.id))
	return true, nil
}

// wsRelay is the streamSink of a WebSocket resume of a turn running on
// another replica: it sends the relayed SSE frames as request r's chunk
// frames, numbered by their index in the response from index from on, as
// follow numbers an in-process replay. Its start frame goes out with the
// first chunk it sends (or, when there is none, at the stream's end).
type wsRelay struct {
	w       *wsConn
	r       *wsRequest
	prefix  []byte
	from    int
	next    int // the index of the next frame
	started bool
}

func (s *wsRelay) write(frames []byte) error {
	for len(frames) > 0 {
		var frame []byte
		frame, frames, _ = bytes.Cut(frames, sseFrameEnd)
		i := s.next
		s.next++
		if i < s.from {
			continue
		}
		chunk, ok := sseChunk(frame)
		if !ok {
			continue // [DONE]
		}
		if !s.started {
			if !s.w.send(s.r, wsControlFrame("start", s.r.id)) {
				return s.r.ctx.Err()
			}
			s.started = true
		}
		if !s.w.send(s.r, wsChunkFrame(s.prefix, i, chunk)) {
			return s.r.ctx.Err()
		}
	}
	return nil
}

// flush does nothing: each frame is sent as it is written.
func (s *wsRelay) flush() {}

// sseFrameEnd ends each SSE frame of a UI message stream.
var sseFrameEnd = []byte("\n\n")

// follow sends start, buf's chunks from index from on as chunk frames
// numbered by their index, and end. It stops early when the request is
// aborted or the connection ends; the turn goes on.
func (w *wsConn) follow(r *wsRequest, buf *uistream.Buffer, from int) {
	w.s.metrics.ActiveStreams.Inc()
	defer w.s.metrics.ActiveStreams.Dec()
	if !w.send(r, wsControlFrame("start", r.id)) {
		return
	}
	prefix := wsChunkPrefix(r.id)
	seq := from
	err := buf.Walk(r.ctx, from, func(frames [][]byte, _ bool) error {
		for _, frame := range frames {
			chunk, ok := sseChunk(frame)
			if !ok {
				continue // [DONE]
			}
			if !w.send(r, wsChunkFrame(prefix, seq, chunk)) {
				return r.ctx.Err()
			}
			seq++
		}
		return nil
	})
	if err == nil {
		w.send(r, wsControlFrame("end", r.id))
	}
}

// attach records cancel, the cancel of the request's turn (nil: none); a
// request aborted before its turn was admitted cancels it now.
func (r *wsRequest) attach(cancel func()) {
	r.mu.Lock()
	r.cancelTurn = cancel
	aborted := r.aborted
	r.mu.Unlock()
	if aborted && cancel != nil {
		cancel()
	}
}

// abort stops the request's stream and cancels its turn, as POST
// …/sessions/:id/cancel does: the turn ends aborted, its partial message
// persisted.
func (r *wsRequest) abort() {
	r.mu.Lock()
	r.aborted = true
	cancelTurn := r.cancelTurn
	r.mu.Unlock()
	r.cancel()
	if cancelTurn != nil {
		cancelTurn()
	}
}

// send queues a frame of request r, waiting for room while r lasts.
func (w *wsConn) send(r *wsRequest, frame []byte) bool {
	select {
	case w.out <- frame:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// reply queues a frame of the read loop, which must not wait: a peer that
// lets the send queue fill up is disconnected.
func (w *wsConn) reply(frame []byte) {
	select {
	case w.out <- frame:
	default:
		w.s.log.Debug("websocket send queue full: closing", "agent", w.ag.name)
		w.cancel()
	}
}

// writeLoop writes queued frames, each within websocket.writeTimeout; a
// peer that does not take one in time is disconnected.
func (w *wsConn) writeLoop() {
	for {
		select {
		case frame := <-w.out:
			if !w.write(frame) {
				return
			}
		case <-w.goAway:
			// Every request has ended: what is queued is all there is.
			for len(w.out) > 0 {
				if !w.write(<-w.out) {
					return
				}
			}
			w.closeWith(websocket.StatusGoingAway, "gateway shutting down")
			return
		case <-w.ctx.Done():
			return
		}
	}
}

func (w *wsConn) write(frame []byte) bool {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.WriteTimeout)
	defer cancel()
	if err := w.conn.Write(ctx, websocket.MessageText, frame); err != nil {
		if w.ctx.Err() == nil {
			w.s.log.Debug("websocket peer too slow or gone: closing", "agent", w.ag.name, "err", err)
		}
		w.cancel()
		return false
	}
	return true
}

// pingLoop pings every websocket.pingInterval; a peer that does not pong
// within websocket.pongTimeout is dead and its connection is closed.
func (w *wsConn) pingLoop() {
	tick := time.NewTicker(w.cfg.PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(w.ctx, w.cfg.PongTimeout)
		err := w.conn.Ping(ctx)
		cancel()
		if err != nil {
			if w.ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				w.s.log.Debug("websocket peer did not answer a ping: closing", "agent", w.ag.name, "err", err)
			}
			w.cancel()
			return
		}
	}
}

// closeWith closes the connection with a status and reason.
func (w *wsConn) closeWith(code websocket.StatusCode, reason string) {
	_ = w.conn.Close(code, reason)
	w.cancel()
}
