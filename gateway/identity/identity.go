// Package identity authenticates bearer JSON Web Tokens issued by an
// OpenID Connect identity provider (auth.jwt): the signature against the
// provider's JWKS (fetched, cached, refreshed periodically and on an
// unknown kid at most once per minRefreshInterval), the accepted
// algorithms (RS256, ES256, EdDSA: never none, never HMAC), exp and nbf
// with the configured clock skew, iss and aud; then the configured claims
// become the principal's tenant, subject and roles.
//
// Every refusal is an *Error with a specific code; no message ever holds
// the token or a part of it.
//
// The JWKS URL is the operator's (configuration), not a client's: it is
// fetched without internal/netguard's public-address check (identity
// providers commonly sit on the private network), but only over https (or
// http to loopback), without following redirects, with a bounded body and
// time.
package identity

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/identity/claimpath"
)

// Codes of the refusals.
const (
	CodeMalformed   = "token_malformed"
	CodeAlgorithm   = "token_algorithm"
	CodeUnknownKey  = "token_unknown_key"
	CodeSignature   = "token_signature"
	CodeExpired     = "token_expired"
	CodeNotYetValid = "token_not_yet_valid"
	CodeIssuer      = "token_issuer"
	CodeAudience    = "token_audience"
	CodeClaims      = "token_claims"
	CodeTenant      = "token_tenant"
	// CodeUnavailable is the 503 of a token whose key could not be
	// looked up because the JWKS could not be fetched.
	CodeUnavailable = "identity_unavailable"
)

// Error is a refused token: the HTTP status (401; 403 for a tenant the
// configuration does not know; 503 when the JWKS cannot be fetched), a
// code and a message safe to show.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func refuse(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Bounds of a JWKS fetch.
const (
	fetchTimeout  = 10 * time.Second
	maxJWKSBytes  = 1 << 20
	maxTokenBytes = 16 << 10
)

// Options are an Authenticator's dependencies.
type Options struct {
	// Client fetches the JWKS; nil makes one (no redirects, 10s).
	Client *http.Client
	// FirstFetchWait bounds how long a token arriving before the first
	// JWKS fetch has ended waits for it (default 10s).
	FirstFetchWait time.Duration
	// Now is the clock of exp and nbf; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Authenticator verifies the tokens of one auth.jwt configuration. It is
// safe for concurrent use; Close stops its JWKS refreshing.
type Authenticator struct {
	cfg     config.JWT
	algs    []jwa.SignatureAlgorithm
	tenants map[string]bool
	tenant  claimpath.Path
	subject claimpath.Path
	roles   claimpath.Path
	now     func() time.Time
	log     *slog.Logger

	cache  *jwk.Cache
	cancel context.CancelFunc

	// mu serializes the refreshes an unknown kid triggers; lastForced is
	// the time of the last one.
	mu         sync.Mutex
	lastForced time.Time
	// firstFetch is when the wait for the first fetch ends.
	firstFetch time.Time
}

// New starts an Authenticator for cfg (validated by config.Parse). The
// first JWKS fetch runs in the background: the gateway starts while the
// provider is down, and tokens are refused with 503 identity_unavailable
// until it answers.
func New(cfg config.JWT, opts Options) (*Authenticator, error) {
	a := &Authenticator{cfg: cfg, now: opts.Now, log: opts.Logger, tenants: map[string]bool{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	for _, name := range cfg.Algorithms {
		alg, ok := jwa.LookupSignatureAlgorithm(name)
		if !ok || !slices.Contains(config.JWTAlgorithms, name) {
			return nil, fmt.Errorf("auth.jwt.algorithms: %q is not accepted", name)
		}
		a.algs = append(a.algs, alg)
	}
	// A tenant claim may name only auth.jwt.tenants: the gateway never
	// makes up a tenant from a token.
	for _, t := range append([]string{cfg.Tenant}, cfg.Tenants...) {
		if t != "" {
			a.tenants[t] = true
		}
	}
	var err error
	for _, p := range []struct {
		dst  *claimpath.Path
		path string
	}{{&a.tenant, cfg.Claims.Tenant}, {&a.subject, cfg.Claims.Principal}, {&a.roles, cfg.Claims.Roles}} {
		if p.path == "" {
			continue
		}
		if *p.dst, err = claimpath.Parse(p.path); err != nil {
			return nil, fmt.Errorf("auth.jwt.claims: %w", err)
		}
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{
			Timeout: fetchTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("the JWKS URL redirects; configure the URL it redirects to")
			},
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	hc := httprc.NewClient(
		httprc.WithWhitelist(httprc.WhitelistFunc(func(u string) bool { return u == cfg.JWKSURL })),
		httprc.WithErrorSink(errsink.NewFunc(func(_ context.Context, err error) {
			a.log.Warn("auth.jwt: fetching the JWKS failed", "url", cfg.JWKSURL, "err", err)
		})))
	if a.cache, err = jwk.NewCache(ctx, hc); err != nil {
		cancel()
		return nil, fmt.Errorf("auth.jwt: %w", err)
	}
	err = a.cache.Register(ctx, cfg.JWKSURL,
		jwk.WithHTTPClient(client),
		jwk.WithWaitReady(false),
		jwk.WithMaxFetchBodySize(maxJWKSBytes),
		jwk.WithHttprcResourceOption(httprc.WithConstantInterval(cfg.RefreshInterval)))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("auth.jwt.jwksURL: %w", err)
	}
	a.cancel, a.firstFetch = cancel, time.Now().Add(cmp.Or(opts.FirstFetchWait, fetchTimeout))
	return a, nil
}

// Close stops the JWKS refreshing.
func (a *Authenticator) Close() {
	a.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = a.cache.Shutdown(ctx)
}

// LooksLikeJWT reports whether a bearer credential has a compact JWS's
// shape, three dot-separated parts: the gateway verifies it as a token
// rather than looking it up among the API keys.
func LooksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }

// Authenticate verifies token and returns its principal and its expiry
// (exp: whatever the token opened, a console session or a WebSocket
// connection, ends then), or an *Error.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (engine.Principal, time.Time, error) {
	if len(token) > maxTokenBytes {
		return engine.Principal{}, time.Time{}, refuse(CodeMalformed, "the token is larger than %d bytes", maxTokenBytes)
	}
	msg, err := jws.ParseString(token)
	if err != nil || len(msg.Signatures()) != 1 || !LooksLikeJWT(token) {
		return engine.Principal{}, time.Time{}, refuse(CodeMalformed, "the bearer credential is not a compact JWS (header.payload.signature)")
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	alg, _ := hdr.Algorithm()
	if !slices.Contains(a.algs, alg) {
		return engine.Principal{}, time.Time{}, refuse(CodeAlgorithm, "the token's algorithm %q is not accepted (auth.jwt.algorithms: %s)",
			printable(alg.String()), strings.Join(a.cfg.Algorithms, ", "))
	}
	kid, ok := hdr.KeyID()
	if !ok || kid == "" {
		return engine.Principal{}, time.Time{}, refuse(CodeUnknownKey, "the token's header names no key (kid)")
	}
	key, err := a.key(ctx, kid)
	if err != nil {
		return engine.Principal{}, time.Time{}, err
	}
	if ka, ok := key.Algorithm(); ok && ka.String() != alg.String() {
		return engine.Principal{}, time.Time{}, refuse(CodeAlgorithm, "the token's algorithm %s is not its key's (%s)", alg, ka)
	}
	if use, ok := key.KeyUsage(); ok && use != "sig" {
		return engine.Principal{}, time.Time{}, refuse(CodeUnknownKey, "the token's key is not a signing key (use %q)", printable(use))
	}
	tok, err := jwt.ParseString(token,
		jwt.WithKey(alg, key),
		jwt.WithValidate(true),
		jwt.WithIssuer(a.cfg.Issuer),
		jwt.WithAudience(a.cfg.Audience),
		jwt.WithAcceptableSkew(a.cfg.ClockSkew),
		jwt.WithClock(jwt.ClockFunc(a.now)),
		jwt.WithRequiredClaim(jwt.ExpirationKey))
	if err != nil {
		return engine.Principal{}, time.Time{}, a.classify(err)
	}
	exp, _ := tok.Expiration() // required above
	p, err := a.principal(msg.Payload())
	return p, exp, err
}

// classify turns jwt.Parse's error into a refusal.
func (a *Authenticator) classify(err error) *Error {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return refuse(CodeExpired, "the token has expired (exp, with %s of clock skew)", a.cfg.ClockSkew)
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return refuse(CodeNotYetValid, "the token is not valid yet (nbf, with %s of clock skew)", a.cfg.ClockSkew)
	case errors.Is(err, jwt.InvalidIssuerError()):
		return refuse(CodeIssuer, "the token's issuer is not auth.jwt.issuer")
	case errors.Is(err, jwt.InvalidAudienceError()):
		return refuse(CodeAudience, "the token's audience does not include auth.jwt.audience")
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return refuse(CodeClaims, "the token has no exp claim: tokens must expire")
	case errors.Is(err, jws.VerifyError()):
		return refuse(CodeSignature, "the token's signature does not verify with its key")
	case errors.Is(err, jwt.ValidateError()):
		return refuse(CodeClaims, "the token's registered claims (iat, exp, nbf) are not valid")
	}
	return refuse(CodeMalformed, "the token's claims are not a JSON object of valid registered claims")
}

// key returns the JWKS's key kid, refreshing the set once when it does not
// have it, unless a token with an unknown kid refreshed it less than
// minRefreshInterval ago. A token arriving before the first fetch has
// ended waits for it (until Options.FirstFetchWait after New).
func (a *Authenticator) key(ctx context.Context, kid string) (jwk.Key, error) {
	k, loaded := a.lookup(ctx, kid)
	if k != nil {
		return k, nil
	}
	if !loaded && time.Now().Before(a.firstFetch) {
		wctx, cancel := context.WithDeadline(ctx, a.firstFetch)
		if r, err := a.cache.LookupResource(wctx, a.cfg.JWKSURL); err == nil {
			_ = r.Ready(wctx)
		}
		cancel()
		if k, _ := a.lookup(ctx, kid); k != nil {
			return k, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Another request may have refreshed the set while this one waited.
	if k, loaded = a.lookup(ctx, kid); k != nil {
		return k, nil
	}
	var err error
	if now := a.now(); now.Sub(a.lastForced) >= a.cfg.MinRefreshInterval || now.Before(a.lastForced) {
		a.lastForced = now
		var set jwk.Set
		if set, err = a.cache.Refresh(ctx, a.cfg.JWKSURL); err != nil {
			a.log.Warn("auth.jwt: fetching the JWKS failed", "url", a.cfg.JWKSURL, "err", err)
		} else if k, ok := set.LookupKeyID(kid); ok {
			return k, nil
		} else {
			loaded = true
		}
	}
	if err != nil || !loaded {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the identity provider's keys (auth.jwt.jwksURL) could not be fetched; retry"}
	}
	return nil, refuse(CodeUnknownKey, "the token's key (kid) is not in the identity provider's key set")
}

// lookup returns the cached set's key kid (nil if it has none), and
// whether a set has been fetched at all.
func (a *Authenticator) lookup(ctx context.Context, kid string) (k jwk.Key, loaded bool) {
	set, err := a.cache.Lookup(ctx, a.cfg.JWKSURL)
	if err != nil {
		return nil, false
	}
	k, _ = set.LookupKeyID(kid)
	return k, true
}

// principal maps the verified claims to the principal.
func (a *Authenticator) principal(payload []byte) (engine.Principal, error) {
	var claims map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return engine.Principal{}, refuse(CodeMalformed, "the token's claims are not a JSON object")
	}
	return a.mapClaims(claims)
}

// mapClaims returns the principal the claims name.
func (a *Authenticator) mapClaims(claims map[string]any) (engine.Principal, error) {
	p := engine.Principal{Tenant: a.cfg.Tenant, Roles: []string{}}
	var err error
	if p.Subject, err = stringClaim(claims, a.subject); err != nil {
		return engine.Principal{}, err
	}
	if a.tenant != nil {
		if p.Tenant, err = stringClaim(claims, a.tenant); err != nil {
			return engine.Principal{}, err
		}
	}
	if !a.tenants[p.Tenant] {
		return engine.Principal{}, &Error{Status: http.StatusForbidden, Code: CodeTenant,
			Message: fmt.Sprintf("the token's tenant %q is not a tenant of this gateway", printable(p.Tenant))}
	}
	if a.roles != nil {
		if p.Roles, err = rolesClaim(claims, a.roles); err != nil {
			return engine.Principal{}, err
		}
		p.Roles = slices.DeleteFunc(p.Roles, a.dropped)
	}
	return p, nil
}

// dropped reports whether a token's role is not granted: one
// auth.jwt.allowedRoles does not list, or, without the list, the
// global-admin role (a provider's role names are not the gateway's to
// trust with every tenant's records unless the operator says so).
func (a *Authenticator) dropped(role string) bool {
	if a.cfg.AllowedRoles == nil {
		return role == config.RoleGlobalAdmin
	}
	return !slices.Contains(a.cfg.AllowedRoles, role)
}

// maxClaimLen bounds a tenant or principal taken from a token.
const maxClaimLen = 256

// stringClaim is the non-empty string at path.
func stringClaim(claims map[string]any, path claimpath.Path) (string, error) {
	v, ok := path.Lookup(claims)
	if !ok {
		return "", refuse(CodeClaims, "the token has no claim %s", path)
	}
	s, ok := v.(string)
	if !ok || s == "" || len(s) > maxClaimLen {
		return "", refuse(CodeClaims, "the token's claim %s is not a string of 1 to %d bytes", path, maxClaimLen)
	}
	return s, nil
}

// maxRoles bounds the roles taken from a token.
const maxRoles = 256

// rolesClaim is the roles at path: an array of strings, or one string of
// space-separated roles; none when the claim is absent.
func rolesClaim(claims map[string]any, path claimpath.Path) ([]string, error) {
	v, ok := path.Lookup(claims)
	if !ok {
		return []string{}, nil
	}
	var roles []string
	switch v := v.(type) {
	case string:
		roles = strings.Fields(v)
	case []any:
		for _, r := range v {
			s, ok := r.(string)
			if !ok {
				return nil, refuse(CodeClaims, "the token's claim %s is not an array of strings", path)
			}
			roles = append(roles, s)
		}
	default:
		return nil, refuse(CodeClaims, "the token's claim %s is neither an array of strings nor a string", path)
	}
	if len(roles) > maxRoles {
		return nil, refuse(CodeClaims, "the token's claim %s holds more than %d roles", path, maxRoles)
	}
	if roles == nil {
		roles = []string{}
	}
	return roles, nil
}

// printable shortens s and replaces what is not printable ASCII, for a
// value from a token quoted in a message.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
