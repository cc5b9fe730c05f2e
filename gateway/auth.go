package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/console"
	"github.com/turngate/turngate/gateway/httpguard"
	"github.com/turngate/turngate/gateway/identity"
)

// RoleAdmin is the role the admin endpoints require. A key holding it is a
// tenant admin: the admin API's records (decisions, timelines, replay,
// approvals history) are those of its key's tenant only.
const RoleAdmin = "admin"

// RoleGlobalAdmin makes an admin key a global admin: with RoleAdmin, the
// admin API's records span every tenant. Alone it grants nothing.
const RoleGlobalAdmin = config.RoleGlobalAdmin

// anonymous is every request's principal when no API keys are configured
// (and the gateway then listens on loopback only). It has one tenant, so
// its admin role sees every record there is; it is a global admin too,
// the one operator of a keyless gateway (fleet-wide kill switches).
var anonymous = engine.Principal{Tenant: config.DefaultTenant, Subject: "anonymous", Roles: []string{RoleAdmin, RoleGlobalAdmin}}

// keyEntry is one configured key: its SHA-256 and its principal. The key
// itself is never kept.
type keyEntry struct {
	hash      [sha256.Size]byte
	principal engine.Principal
}

// authenticator maps bearer credentials to principals: API keys, and
// JWTs when auth.jwt is configured.
type authenticator struct {
	keys []keyEntry
	// jwt verifies tokens; nil without auth.jwt.
	jwt *identity.Authenticator
}

// newAuthenticator hashes the configured keys and starts the JWT
// verifier of auth.jwt, or keeps prev's (the live state a reload
// replaces; nil at start) when its auth.jwt is the same: its keys stay
// cached.
func newAuthenticator(auth config.Auth, prev *liveState, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{}
	for i, k := range auth.APIKeys {
		var e keyEntry
		if k.Key != "" {
			e.hash = sha256.Sum256([]byte(k.Key))
		} else {
			b, err := hex.DecodeString(k.KeySHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth.apiKeys[%d]: keySha256 must be 64 hex digits", i)
			}
			copy(e.hash[:], b)
		}
		subject := k.Subject
		if subject == "" {
			subject = fmt.Sprintf("key-%d", i)
		}
		e.principal = engine.Principal{Tenant: k.Tenant, Subject: subject, Roles: slices.Clone(k.Roles)}
		if e.principal.Roles == nil {
			e.principal.Roles = []string{}
		}
		a.keys = append(a.keys, e)
	}
	if prev != nil && prev.auth.jwt != nil && reflect.DeepEqual(prev.cfg.Auth.JWT, auth.JWT) {
		a.jwt = prev.auth.jwt
	} else if auth.JWT != nil {
		var err error
		if a.jwt, err = identity.New(*auth.JWT, identity.Options{Logger: log}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// close stops the JWT verifier's JWKS refreshing.
func (a *authenticator) close() {
	if a.jwt != nil {
		a.jwt.Close()
	}
}

// open reports whether neither keys nor auth.jwt are configured.
func (a *authenticator) open() bool { return len(a.keys) == 0 && a.jwt == nil }

// lookup returns the principal of the API key whose SHA-256 is hash. It
// compares against every entry in constant time and does not stop at the
// first match, so timing reveals neither the key nor its position.
func (a *authenticator) lookup(hash [sha256.Size]byte) (engine.Principal, bool) {
	found := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(hash[:], a.keys[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return engine.Principal{}, false
	}
	return a.keys[found].principal, true
}

const principalKey = "turngate.principal"

// guard sets the response headers every answer carries and, on a gateway
// without API keys, refuses what httpguard.OpenModeRefusal names (403):
// requests for another name than its loopback address, and cross-site
// requests that could change something.
func (s *Server) guard(c *gin.Context) {
	httpguard.SetResponseHeaders(c.Writer.Header())
	if s.auth().open() {
		if why := httpguard.OpenModeRefusal(c.Request); why != "" {
			s.writeError(c, errorf(http.StatusForbidden, CodeForbidden, "%s", why))
			c.Abort()
			return
		}
	}
	c.Next()
}

// authenticate sets the request's principal or answers 401.
func (s *Server) authenticate(c *gin.Context) {
	if s.auth().open() {
		c.Set(principalKey, anonymous)
		c.Next()
		return
	}
	if err := s.throttled(c.Request); err != nil {
		s.writeError(c, err)
		c.Abort()
		return
	}
	p, err := s.requestPrincipal(c.Request)
	if c.GetString(errorFormatKey) == formatAnthropic && c.GetHeader("X-Api-Key") != "" {
		p, err = s.xAPIKeyPrincipal(c.Request)
	}
	if err != nil {
		s.authFailed(c.Request.Context(), httpguard.Source(c.Request), err, c.Request.Method+" "+c.FullPath())
		s.writeError(c, err)
		c.Abort()
		return
	}
	c.Set(principalKey, p)
	c.Next()
}

// requestPrincipal returns the principal of r: its bearer key, or, for a
// request without an Authorization header that carries the console's
// session cookie, the console session's (a 401 when it ended, a 403 when
// a request that changes something lacks its CSRF token).
func (s *Server) requestPrincipal(r *http.Request) (engine.Principal, error) {
	h := r.Header.Get("Authorization")
	if h != "" || !console.HasCookie(r) {
		return s.bearerPrincipal(r.Context(), h)
	}
	p, err := s.console.Principal(r)
	switch {
	case errors.Is(err, console.ErrCSRF):
		return p, errorf(http.StatusForbidden, CodeForbidden, "%v", err)
	case err != nil:
		return p, errorf(http.StatusUnauthorized, CodeUnauthorized, "%v", err)
	}
	return p, nil
}

// newConsole returns the console of s: without keys it needs no sign-in.
func (s *Server) newConsole() *console.Console {
	opts := console.Options{Anonymous: anonymous, Failures: s.failures, Logger: s.log}
	if !s.auth().open() {
		// A key or, with auth.jwt, a JWT signs in; its session ends at the
		// token's exp, or when a reload removed the key.
		opts.Lookup = func(ctx context.Context, key string) (console.Credential, error) {
			return s.consoleCredential(ctx, newHeldCredential(key))
		}
	}
	return console.New(opts)
}

// consoleCredential authenticates b for the console, with the refusal's
// status and code.
func (s *Server) consoleCredential(ctx context.Context, b heldCredential) (console.Credential, error) {
	p, exp, err := s.verify(ctx, b)
	if err != nil {
		ae := toAPIError(err)
		return console.Credential{}, &console.Refusal{Status: ae.Status, Code: ae.Code, Message: ae.Message}
	}
	return console.Credential{Principal: p, Expires: exp, Recheck: func(ctx context.Context) (console.Credential, error) {
		return s.consoleCredential(ctx, b)
	}}, nil
}

// throttled is the 429 of a client address that failed to authenticate
// auth.maxFailuresPerMinute times this minute, or nil. It is checked
// before the key: a guesser learns nothing more until the minute ends.
func (s *Server) throttled(r *http.Request) error {
	wait, ok := s.failures.Throttled(httpguard.Source(r))
	if !ok {
		return nil
	}
	ae := errorf(http.StatusTooManyRequests, CodeTooManyRequests,
		"too many failed authentications from this address (auth.maxFailuresPerMinute); retry later")
	ae.RetryAfter = wait
	return ae
}

// authFailed records the failed authentication err of a client at source
// (its address) at where: logged at info (sampled) and counted against
// source.
func (s *Server) authFailed(ctx context.Context, source string, err error, where string) {
	s.failures.Fail(ctx, source, toAPIError(err).Message, where)
}

// xAPIKeyPrincipal returns the principal of r's x-api-key header, as
// Anthropic's clients send their key (the Anthropic endpoint only). A
// request with an Authorization header too must carry the same key in
// both (401 otherwise: which key is meant would be a guess).
func (s *Server) xAPIKeyPrincipal(r *http.Request) (engine.Principal, error) {
	key := r.Header.Get("X-Api-Key")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, bearer, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(bearer)), []byte(key)) != 1 {
			return engine.Principal{}, errorf(http.StatusUnauthorized, CodeUnauthorized, "x-api-key and Authorization carry different API keys")
		}
	}
	return s.keyPrincipal(r.Context(), key)
}

// bearerPrincipal returns the principal of an Authorization header value
// "Bearer KEY" (or "Bearer JWT"), or a 401.
func (s *Server) bearerPrincipal(ctx context.Context, h string) (engine.Principal, error) {
	key, err := bearerKey(h)
	if err != nil {
		return engine.Principal{}, err
	}
	return s.keyPrincipal(ctx, key)
}

// bearerKey is the credential of an Authorization header value "Bearer
// KEY", or a 401.
func bearerKey(h string) (string, error) {
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return "", errorf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer API key")
	}
	return strings.TrimSpace(key), nil
}

// heldCredential is a bearer credential as kept to authenticate it again
// after a config reload: an API key's SHA-256 (never the key), and the
// token of a credential shaped like a JWT (it expires).
type heldCredential struct {
	hash  [sha256.Size]byte
	token string
}

func newHeldCredential(key string) heldCredential {
	b := heldCredential{hash: sha256.Sum256([]byte(key))}
	if identity.LooksLikeJWT(key) {
		b.token = key
	}
	return b
}

// keyPrincipal returns the principal of a bearer credential, or a 401
// (verify).
func (s *Server) keyPrincipal(ctx context.Context, key string) (engine.Principal, error) {
	p, _, err := s.verify(ctx, newHeldCredential(key))
	return p, err
}

// verify returns the principal of a bearer credential under the live
// configuration and when it stops authenticating (a JWT's exp; zero for an
// API key), or a 401: with auth.jwt, a credential shaped like a JWT is
// verified as one (its refusal says why: token_expired, token_signature…);
// any other is looked up among the API keys.
func (s *Server) verify(ctx context.Context, b heldCredential) (engine.Principal, time.Time, error) {
	auth := s.auth()
	if auth.jwt != nil && b.token != "" {
		p, exp, err := auth.jwt.Authenticate(ctx, b.token)
		if ie := (*identity.Error)(nil); errors.As(err, &ie) {
			return p, exp, &apiError{Status: ie.Status, Code: ie.Code, Message: ie.Message, Retryable: ie.Status >= 500}
		}
		return p, exp, err
	}
	p, ok := auth.lookup(b.hash)
	if !ok {
		return engine.Principal{}, time.Time{}, errorf(http.StatusUnauthorized, CodeUnauthorized, "invalid API key")
	}
	return p, time.Time{}, nil
}

// requireAdmin answers 403 unless the principal has the admin role.
func (s *Server) requireAdmin(c *gin.Context) {
	if !slices.Contains(principal(c).Roles, RoleAdmin) {
		s.writeError(c, errorf(http.StatusForbidden, CodeForbidden, "this endpoint needs the %q role", RoleAdmin))
		c.Abort()
		return
	}
	c.Next()
}

// principal returns the authenticated principal of c.
func principal(c *gin.Context) engine.Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(engine.Principal)
	return pr
}
