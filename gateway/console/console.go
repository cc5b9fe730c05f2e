// Package console serves turngate's security console: the browser pages at
// /console (Overview, Decisions, Turn timeline, Playground, Replay,
// Approvals) from assets embedded in the binary, and the sign-in that
// exchanges an API key for a server-side session cookie.
//
// The pages are plain HTML, CSS and JavaScript modules (no framework, no
// build step, nothing loaded from another origin); they call the gateway's
// own admin and approvals API with the session cookie and, on every
// request that can change something, the session's CSRF token in the
// X-Turngate-CSRF header. The gateway's authentication middleware asks
// Principal for such requests.
//
// A gateway without API keys (every request is the anonymous admin, and
// it listens on loopback only) serves the console without sign-in, as it
// serves the rest of its API to any program of the machine.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/httpguard"
)

//go:embed assets
var assets embed.FS

// Path is where the console is served.
const Path = "/console"

// CookieName is the session cookie's name.
const CookieName = "turngate_console"

// CSRFHeader carries the session's CSRF token on every request of the
// console that can change something (any method but GET, HEAD, OPTIONS).
const CSRFHeader = "X-Turngate-CSRF"

// Defaults of Options.
const (
	// DefaultSessionTTL is how long a sign-in lasts: a working day.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultMaxSessions bounds the sessions one replica holds; the
	// oldest is ended when a sign-in would pass it.
	DefaultMaxSessions = 1000
	// SignInFailuresPerMinute is how many failed sign-ins one address
	// (IPv6: its /64) may make a minute before the console refuses its
	// sign-ins (429) until the minute ends, whatever
	// auth.maxFailuresPerMinute says.
	SignInFailuresPerMinute = 10
)

// RoleAdmin is the role that sees every view; a principal with other roles
// only (an approver) sees the Approvals view.
const RoleAdmin = "admin"

// Credential is what a sign-in's key (an API key or a JWT) authenticates
// as.
type Credential struct {
	Principal engine.Principal
	// Expires is when the credential stops authenticating (a JWT's exp;
	// zero when it does not expire): its session ends then at the latest.
	Expires time.Time
	// Recheck authenticates the credential again, with the configuration
	// of the moment: a session calls it on its first request after
	// ConfigChanged, and ends when it fails.
	Recheck func(context.Context) (Credential, error)
}

// Refusal is a refused sign-in credential, with the status and code the
// gateway's bearer path answers (401 token_expired, 503
// identity_unavailable…); a Lookup error of another type is a 401
// "unauthorized".
type Refusal struct {
	Status        int
	Code, Message string
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Status, r.Code, r.Message) }

// Options configure a Console.
type Options struct {
	// Lookup authenticates a sign-in's key. Nil means the gateway has no
	// keys: the console needs no sign-in and every page acts as
	// Anonymous.
	Lookup func(ctx context.Context, key string) (Credential, error)
	// Anonymous is the principal of a gateway without keys.
	Anonymous engine.Principal
	// Failures is the gateway's record of failed authentications: failed
	// sign-ins are logged and counted there too (auth.maxFailuresPerMinute).
	Failures *httpguard.Failures
	// SessionTTL is how long a session lasts (0: DefaultSessionTTL).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions held (0: DefaultMaxSessions).
	MaxSessions int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger logs sign-ins and sign-outs (nil: discarded).
	Logger *slog.Logger
}

// Console serves /console and resolves the principal of its requests.
type Console struct {
	opts     Options
	sessions *sessions
	// signIn throttles the sign-in of an address that failed too often,
	// even where auth.maxFailuresPerMinute is off.
	signIn *httpguard.Failures
	static fs.FS
	// generation counts ConfigChanged calls: a session signed in at an
	// older one rechecks its credential.
	generation atomic.Uint64
}

// New returns a console with opts.
func New(opts Options) *Console {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Failures == nil {
		opts.Failures = httpguard.NewFailures(opts.Logger, 0, opts.Now)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	return &Console{
		opts:     opts,
		sessions: newSessions(opts.MaxSessions, opts.SessionTTL, opts.Now),
		signIn:   httpguard.NewFailures(opts.Logger, SignInFailuresPerMinute, opts.Now),
		static:   static,
	}
}

// ConfigChanged says the gateway's credentials may have changed (a config
// reload): every session rechecks its credential on its next request, and
// ends if the key was removed or no longer authenticates.
func (c *Console) ConfigChanged() { c.generation.Add(1) }

// open reports whether the gateway has no keys.
func (c *Console) open() bool { return c.opts.Lookup == nil }

// Errors of Principal.
var (
	// ErrNoSession: the request's cookie names no live session.
	ErrNoSession = errors.New("the console session expired or was signed out: sign in again")
	// ErrRevoked: the credential the session signed in with no longer
	// authenticates (a config reload removed the key, or changed it).
	ErrRevoked = errors.New("the key this console session signed in with no longer authenticates: sign in again")
	// ErrCSRF: a request that can change something lacks the session's
	// CSRF token, or carries another.
	ErrCSRF = errors.New("a console request that changes something must carry its session's CSRF token in the " + CSRFHeader + " header")
)

// HasCookie reports whether r carries a console session cookie.
func HasCookie(r *http.Request) bool {
	_, err := r.Cookie(CookieName)
	return err == nil
}

// Principal returns the principal of r's console session: ErrNoSession
// when the cookie names none (unknown, expired, signed out), ErrRevoked
// when its credential no longer authenticates, ErrCSRF when r
// can change something and its CSRF header is missing or wrong, or
// another site sent it.
func (c *Console) Principal(r *http.Request) (engine.Principal, error) {
	se, err := c.session(r)
	if err != nil {
		return engine.Principal{}, err
	}
	return se.principal, nil
}

// session returns r's live session, with the CSRF check of Principal.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil, ErrNoSession
	}
	se, ok := c.sessions.get(ck.Value)
	if !ok {
		return nil, ErrNoSession
	}
	if gen := c.generation.Load(); se.generation != gen && se.recheck != nil {
		cred, err := se.recheck(r.Context())
		if err != nil {
			c.sessions.revoke(ck.Value)
			c.opts.Logger.InfoContext(r.Context(), "console session ended: its credential no longer authenticates",
				"tenant", se.principal.Tenant, "subject", se.principal.Subject, "err", err)
			return nil, ErrRevoked
		}
		if se, ok = c.sessions.renew(ck.Value, se, cred, gen); !ok {
			return nil, ErrNoSession
		}
	}
	if !safeMethod(r.Method) && (crossSite(r) || !tokenEqual(r.Header.Get(CSRFHeader), se.csrf)) {
		return nil, ErrCSRF
	}
	return se, nil
}

// safeMethod reports whether m cannot change anything (RFC 9110 9.2.1).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSite reports whether the browser says another site made r.
func crossSite(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site")
}

// isAdmin reports whether p has the admin role.
func isAdmin(p engine.Principal) bool { return slices.Contains(p.Roles, RoleAdmin) }

// SetSecurityHeaders sets the headers of every console response: a
// Content-Security-Policy that runs only the console's own scripts and
// styles (no inline script, no other origin, no framing), and the
// headers that keep the pages out of frames, caches and referrers.
func SetSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	h.Set("Cache-Control", "no-store")
}

// ServeHTTP serves everything under Path.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SetSecurityHeaders(w.Header())
	p := r.URL.Path
	switch {
	case p == Path:
		http.Redirect(w, r, Path+"/", http.StatusPermanentRedirect)
	case p == Path+"/api/session":
		c.serveSession(w, r)
	case !safeMethod(r.Method):
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
	case p == Path+"/":
		c.serveAsset(w, r, "static/index.html")
	case strings.HasPrefix(p, Path+"/static/"):
		c.serveAsset(w, r, strings.TrimPrefix(p, Path+"/"))
	case strings.HasPrefix(p, Path+"/app/"):
		// The pages behind the sign-in are served to a session only.
		if !c.open() {
			if _, err := c.session(r); err != nil {
				writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
				return
			}
		}
		c.serveAsset(w, r, strings.TrimPrefix(p, Path+"/"))
	default:
		writeError(w, http.StatusNotFound, "not_found", "no console page "+p)
	}
}

// contentTypes are the types of the embedded assets, by extension.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// serveAsset writes the embedded file name (a path below assets/).
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	clean := path.Clean(name)
	ct, ok := contentTypes[path.Ext(clean)]
	data, err := fs.ReadFile(c.static, clean)
	if clean != name || !ok || err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no console page "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", ct)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(data)
}
