package config

import (
	"cmp"
	"fmt"
	"path"
	"time"
)

// WebSocket configures the WebSocket chat endpoint, GET
// /v1/agents/{agent}/ws (the ai package's WebSocketChatTransport). Every
// WebSocket connection is also one of limits.maxConnections.
type WebSocket struct {
	// OriginPatterns are the browser origins allowed besides the request's
	// own host: host patterns matched case-insensitively with path.Match
	// ("app.example.com", "*.example.com"), or "scheme://host" patterns that
	// match the scheme too. A handshake whose Origin matches none is
	// refused with 403; a client that sends no Origin (not a browser) is
	// not checked.
	OriginPatterns []string `yaml:"originPatterns"`
	// MaxConnections caps the WebSocket connections open at once; a
	// handshake beyond it is answered 503.
	MaxConnections int `yaml:"maxConnections"`
	// MaxFrameBytes caps one client frame; a larger one closes the
	// connection with 1009 (message too big). Default limits.maxBodyBytes.
	MaxFrameBytes int64 `yaml:"maxFrameBytes"`
	// MaxRequestsPerConnection caps the send and resume requests one
	// connection has in flight; one more is answered with an error frame.
	MaxRequestsPerConnection int `yaml:"maxRequestsPerConnection"`
	// SendQueue is how many frames a connection's send queue holds for a
	// peer that reads slower than its turns stream.
	SendQueue int `yaml:"sendQueue"`
	// WriteTimeout is how long the peer has to take one frame; a peer that
	// does not is disconnected (its turns go on and are persisted).
	WriteTimeout time.Duration `yaml:"writeTimeout"`
	// PingInterval is how often the gateway pings an open connection, and
	// PongTimeout how long it waits for the pong before it closes the
	// connection as dead.
	PingInterval time.Duration `yaml:"pingInterval"`
	PongTimeout  time.Duration `yaml:"pongTimeout"`
	// AuthTimeout closes a connection whose handshake carried no API key
	// when none of its requests authenticated within this time.
	AuthTimeout time.Duration `yaml:"authTimeout"`
	// MaxUnauthenticated caps the connections whose handshake carried no
	// key and none of whose requests has authenticated yet; a keyless
	// handshake beyond it is answered 503. They are not counted in
	// maxConnections until one of their requests authenticates, so
	// keyless sockets cannot lock out the clients that have keys.
	MaxUnauthenticated int `yaml:"maxUnauthenticated"`
	// MaxUnauthenticatedPerSource caps those of one client address (an
	// IPv6 address's /64), so one client cannot take the whole keyless
	// budget from the browsers that authenticate in their first frame; a
	// keyless handshake beyond it is answered 429.
	MaxUnauthenticatedPerSource int `yaml:"maxUnauthenticatedPerSource"`
	// UnauthenticatedFrameBytes caps each frame of such a connection until
	// one of its requests authenticates (the authenticating frame
	// included): a larger one closes it with 1009. Clients whose first
	// message is large (attachments) authenticate the handshake instead.
	UnauthenticatedFrameBytes int64 `yaml:"unauthenticatedFrameBytes"`
	// UnauthenticatedFrames is how many frames such a connection may send
	// that do not authenticate; the next closes it with 1008.
	UnauthenticatedFrames int `yaml:"unauthenticatedFrames"`
}

// Defaults for unset websocket settings.
const (
	DefaultWSMaxConnections           = 1024 // each holds a goroutine trio and a send queue
	DefaultWSMaxRequestsPerConnection = 16   // a chat UI runs one or two; room for tabs sharing a socket
	DefaultWSSendQueue                = 256  // about two model steps of chunks
	DefaultWSWriteTimeout             = 10 * time.Second
	DefaultWSPingInterval             = 30 * time.Second // under the 60 s idle cut of common proxies
	DefaultWSPongTimeout              = 10 * time.Second
	DefaultWSAuthTimeout              = 10 * time.Second
	// DefaultWSMaxUnauthenticated keyless connections may wait for their
	// first authenticated request at once: a browser tab opens one.
	DefaultWSMaxUnauthenticated = 64
	// DefaultWSMaxUnauthenticatedPerSource is room for a few tabs of one
	// browser, or several users behind one NAT.
	DefaultWSMaxUnauthenticatedPerSource = 16
	// DefaultWSUnauthenticatedFrameBytes is room for a first chat message
	// of text with headers.authorization; not for attachments.
	DefaultWSUnauthenticatedFrameBytes = 256 << 10
	// DefaultWSUnauthenticatedFrames lets a client retry a mistyped key a
	// few times.
	DefaultWSUnauthenticatedFrames = 4
)

// applyDefaults fills the unset websocket settings; maxBodyBytes is the
// default frame cap.
func (w *WebSocket) applyDefaults(maxBodyBytes int64) {
	w.MaxConnections = cmp.Or(w.MaxConnections, DefaultWSMaxConnections)
	w.MaxFrameBytes = cmp.Or(w.MaxFrameBytes, max(maxBodyBytes, 0)) // a negative maxBodyBytes is its own error
	w.MaxRequestsPerConnection = cmp.Or(w.MaxRequestsPerConnection, DefaultWSMaxRequestsPerConnection)
	w.SendQueue = cmp.Or(w.SendQueue, DefaultWSSendQueue)
	w.WriteTimeout = cmp.Or(w.WriteTimeout, DefaultWSWriteTimeout)
	w.PingInterval = cmp.Or(w.PingInterval, DefaultWSPingInterval)
	w.PongTimeout = cmp.Or(w.PongTimeout, DefaultWSPongTimeout)
	w.AuthTimeout = cmp.Or(w.AuthTimeout, DefaultWSAuthTimeout)
	w.MaxUnauthenticated = cmp.Or(w.MaxUnauthenticated, DefaultWSMaxUnauthenticated)
	w.MaxUnauthenticatedPerSource = cmp.Or(w.MaxUnauthenticatedPerSource, DefaultWSMaxUnauthenticatedPerSource)
	w.UnauthenticatedFrameBytes = cmp.Or(w.UnauthenticatedFrameBytes, min(DefaultWSUnauthenticatedFrameBytes, w.MaxFrameBytes))
	w.UnauthenticatedFrames = cmp.Or(w.UnauthenticatedFrames, DefaultWSUnauthenticatedFrames)
}

// validate reports the websocket settings that cannot work.
func (w *WebSocket) validate(add func(path, format string, args ...any)) {
	notNegative(add, "websocket", mustNotBeNegative, map[string]any{
		"maxConnections": w.MaxConnections, "maxFrameBytes": w.MaxFrameBytes, "maxRequestsPerConnection": w.MaxRequestsPerConnection,
		"sendQueue": w.SendQueue, "writeTimeout": w.WriteTimeout, "pingInterval": w.PingInterval, "pongTimeout": w.PongTimeout,
		"authTimeout": w.AuthTimeout, "maxUnauthenticated": w.MaxUnauthenticated, "maxUnauthenticatedPerSource": w.MaxUnauthenticatedPerSource,
		"unauthenticatedFrameBytes": w.UnauthenticatedFrameBytes,
		"unauthenticatedFrames":     w.UnauthenticatedFrames,
	})
	for i, p := range w.OriginPatterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			item := fmt.Sprintf("websocket.originPatterns[%d]", i)
			add(item, "%s: %q is not a valid host pattern (path.Match syntax, e.g. \"*.example.com\")", item, p)
		}
	}
}
