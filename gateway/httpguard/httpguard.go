// Package httpguard holds the gateway's request checks that sit in front of
// every handler: the response headers every API answer carries, the JSON
// content type every request body must declare, the checks that keep a
// keyless (open-mode) gateway out of reach of web pages, and the sampled,
// optionally throttled record of failed authentications (failures.go).
//
// The functions take net/http values, not gin's, so that they can be
// tested and reused without the router.
package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// SetResponseHeaders sets the headers every API response carries: nothing
// the gateway answers (transcripts, approvals, admin documents) may be kept
// by a cache, and no browser may sniff a JSON answer into something it
// renders.
func SetResponseHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// JSONType is the only content type the API takes.
const JSONType = "application/json"

// HasBody reports whether r carries a body: a Content-Length above zero or
// a chunked one of unknown length.
func HasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// BodyType returns the media type of r's body (parameters such as charset
// dropped) and whether it is JSONType. A body without a Content-Type is not
// JSON: a browser's form or text/plain POST needs no CORS preflight, and
// so must never be taken as an API request.
func BodyType(r *http.Request) (string, bool) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct, false
	}
	return mt, mt == JSONType
}

// safeMethod reports whether m cannot change anything (RFC 9110 9.2.1).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// LocalPort returns the port of the listener that accepted r ("" when the
// server did not record it).
func LocalPort(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return port
}

// OpenModeRefusal returns why a keyless gateway refuses r, or "" when it
// serves it. Without keys every request acts as the admin of tenant
// "default", so only the machine itself may reach the gateway, and only
// through a program it runs, never through a web page it visits:
//
//   - the Host header must name a loopback address (localhost, 127.0.0.0/8,
//     ::1) and the port the request arrived on: a page whose own name was
//     rebound to 127.0.0.1 (DNS rebinding) sends its own name;
//   - a request that can change something (any method but GET, HEAD and
//     OPTIONS) must not say it comes from another site: no
//     Sec-Fetch-Site: cross-site, and no Origin but a loopback one.
func OpenModeRefusal(r *http.Request) string {
	port := LocalPort(r)
	if !LoopbackHost(r.Host, port) {
		return "a gateway without API keys answers only requests for its loopback address (Host localhost:" + port + ", 127.0.0.1:" + port + " or [::1]:" + port + "); configure auth.apiKeys to serve other names"
	}
	if safeMethod(r.Method) {
		return ""
	}
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		return "a gateway without API keys refuses requests a web page of another site makes (Sec-Fetch-Site: cross-site)"
	}
	if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
		return "a gateway without API keys refuses requests from web pages of other origins (Origin " + o + ")"
	}
	return ""
}

// LoopbackHost reports whether host, a Host header, names a loopback
// address with port (a Host without a port means port 80). An empty port
// matches none.
func LoopbackHost(host, port string) bool {
	if port == "" {
		return false
	}
	name, p, err := net.SplitHostPort(host)
	if err != nil {
		name, p = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "80"
	}
	return p == port && LoopbackName(name)
}

// LoopbackName reports whether name is "localhost" (any case) or a
// loopback IP literal. Other names, even ones that resolve to 127.0.0.1
// now, are what a rebinding page would send.
func LoopbackName(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// loopbackOrigin reports whether o is an http(s) origin on a loopback
// name, any port: a page served from this machine ("null", the origin of
// sandboxed and file pages, is not).
func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return LoopbackName(u.Hostname())
}

// RequireBearer serves next only to requests whose Authorization header is
// "Bearer KEY" for a KEY whose SHA-256 is hash (compared in constant
// time); the others get a 401 JSON error, in the gateway's format.
func RequireBearer(hash [sha256.Size]byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], hash[:]) != 1 {
			SetResponseHeaders(w.Header())
			w.Header().Set("Content-Type", JSONType)
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","message":"this endpoint needs its bearer key (metrics.key)"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireLoopbackHost serves next only to requests whose Host header names
// a loopback address and the port they arrived on (LoopbackHost); the
// others get a 403 JSON error. It guards a keyless listener bound to
// loopback against DNS rebinding, as OpenModeRefusal guards a keyless
// gateway: a web page whose own name was rebound to 127.0.0.1 sends that
// name.
func RequireLoopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if port := LocalPort(r); !LoopbackHost(r.Host, port) {
			SetResponseHeaders(w.Header())
			w.Header().Set("Content-Type", JSONType)
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"code":"forbidden","message":"this listener answers only requests for its loopback address (Host localhost:` + port + ` or 127.0.0.1:` + port + `); set metrics.key to serve other names"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
