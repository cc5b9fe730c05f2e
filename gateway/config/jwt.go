package config

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/turngate/turngate/gateway/identity/claimpath"
)

// JWT signature algorithms auth.jwt.algorithms may list: asymmetric ones
// only. "none" and the HMAC family (HS256…) are refused: an HMAC key
// would be the JWKS's public key, which anyone can fetch.
const (
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
	AlgEdDSA = "EdDSA"
)

// JWTAlgorithms are the algorithms auth.jwt accepts, and its default.
var JWTAlgorithms = []string{AlgRS256, AlgES256, AlgEdDSA}

// Defaults and bounds of auth.jwt.
const (
	DefaultJWTClockSkew          = 30 * time.Second
	MaxJWTClockSkew              = 5 * time.Minute
	DefaultJWTRefreshInterval    = 15 * time.Minute
	DefaultJWTMinRefreshInterval = 30 * time.Second
	minJWTRefreshInterval        = time.Second
	DefaultJWTPrincipalClaim     = "sub"
)

// JWT configures bearer authentication with JSON Web Tokens issued by an
// OpenID Connect identity provider, beside the API keys: a bearer
// credential shaped like a JWT (three dot-separated parts) is verified
// against the provider's JWKS.
type JWT struct {
	// Issuer is the iss every token must carry, exactly.
	Issuer string `yaml:"issuer"`
	// Audience must be one of every token's aud values.
	Audience string `yaml:"audience"`
	// JWKSURL is the provider's key set (its jwks_uri): https, or http
	// on a loopback address only.
	JWKSURL string `yaml:"jwksURL"`
	// Algorithms are the accepted signature algorithms, of RS256, ES256
	// and EdDSA (all three by default).
	Algorithms []string `yaml:"algorithms"`
	// ClockSkew is the leeway of exp and nbf (default 30s, at most 5m).
	ClockSkew time.Duration `yaml:"clockSkew"`
	// RefreshInterval is how often the key set is fetched again (default
	// 15m).
	RefreshInterval time.Duration `yaml:"refreshInterval"`
	// MinRefreshInterval spaces the fetches a token with an unknown kid
	// triggers (default 30s): forged kids cannot hammer the provider.
	MinRefreshInterval time.Duration `yaml:"minRefreshInterval"`
	// Claims map claims to the principal.
	Claims JWTClaims `yaml:"claims"`
	// Tenant is every token's tenant, when claims.tenant is not set.
	Tenant string `yaml:"tenant"`
	// Tenants are the tenants claims.tenant may name; a token naming
	// another is refused (403 token_tenant).
	Tenants []string `yaml:"tenants"`
	// AllowedRoles, when set, are the roles claims.roles may grant: a
	// token's other roles are dropped. The global-admin role is honoured
	// from a token only when listed here (without the list it is
	// dropped).
	AllowedRoles []string `yaml:"allowedRoles"`
}

// RoleGlobalAdmin is the role that makes an admin a global admin (every
// tenant's records): a token grants it only through auth.jwt.allowedRoles.
const RoleGlobalAdmin = "global-admin"

// JWTClaims are claim paths (package claimpath: "realm_access.roles",
// "\"https://example.com/roles\"").
type JWTClaims struct {
	// Tenant is the claim naming the tenant (a string).
	Tenant string `yaml:"tenant"`
	// Principal is the claim naming the principal (default sub).
	Principal string `yaml:"principal"`
	// Roles is the claim holding the roles: an array of strings, or one
	// string of space-separated roles (as OAuth's scope). Absent: no roles.
	Roles string `yaml:"roles"`
}

func (j *JWT) applyDefaults() {
	if j == nil {
		return
	}
	if j.Algorithms == nil {
		j.Algorithms = slices.Clone(JWTAlgorithms)
	}
	j.ClockSkew = cmp.Or(j.ClockSkew, DefaultJWTClockSkew)
	j.RefreshInterval = cmp.Or(j.RefreshInterval, DefaultJWTRefreshInterval)
	j.MinRefreshInterval = cmp.Or(j.MinRefreshInterval, DefaultJWTMinRefreshInterval)
	j.Claims.Principal = cmp.Or(j.Claims.Principal, DefaultJWTPrincipalClaim)
}

// validate reports auth.jwt's problems, each at its field.
func (j *JWT) validate(add func(path, format string, args ...any)) {
	if j == nil {
		return
	}
	const p = "auth.jwt"
	if j.Issuer == "" {
		add(p+".issuer", "%s.issuer: required: the iss of the provider's tokens (its OpenID configuration's issuer)", p)
	}
	if j.Audience == "" {
		add(p+".audience", "%s.audience: required: the aud tokens for this gateway carry (the client id at the provider)", p)
	}
	if err := checkJWKSURL(j.JWKSURL); err != nil {
		add(p+".jwksURL", "%s.jwksURL: %v", p, err)
	}
	if len(j.Algorithms) == 0 {
		add(p+".algorithms", "%s.algorithms: must list at least one of %s", p, strings.Join(JWTAlgorithms, ", "))
	}
	for i, alg := range j.Algorithms {
		field := fmt.Sprintf("%s.algorithms[%d]", p, i)
		switch {
		case slices.Contains(JWTAlgorithms, alg):
		case strings.EqualFold(alg, "none"):
			add(field, "%s: %q is never accepted: an unsigned token proves nothing", field, alg)
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			add(field, "%s: %q (HMAC) is never accepted: its secret would be the JWKS's public key, which anyone can fetch", field, alg)
		default:
			add(field, "%s: %q is not one of %s%s", field, alg, strings.Join(JWTAlgorithms, ", "), didYouMeanOf(alg, JWTAlgorithms))
		}
	}
	notNegative(add, p, mustNotBeNegative, map[string]any{"clockSkew": j.ClockSkew})
	if j.ClockSkew > MaxJWTClockSkew {
		add(p+".clockSkew", "%s.clockSkew: at most %s, not %s", p, MaxJWTClockSkew, j.ClockSkew)
	}
	if j.RefreshInterval < minJWTRefreshInterval {
		add(p+".refreshInterval", "%s.refreshInterval: at least %s, not %s", p, minJWTRefreshInterval, j.RefreshInterval)
	}
	if j.MinRefreshInterval < minJWTRefreshInterval {
		add(p+".minRefreshInterval", "%s.minRefreshInterval: at least %s, not %s", p, minJWTRefreshInterval, j.MinRefreshInterval)
	}
	for field, path := range map[string]string{"tenant": j.Claims.Tenant, "principal": j.Claims.Principal, "roles": j.Claims.Roles} {
		if path == "" {
			continue
		}
		if _, err := claimpath.Parse(path); err != nil {
			add(p+".claims."+field, "%s.claims.%s: %v", p, field, err)
		}
	}
	switch {
	case j.Claims.Tenant == "" && j.Tenant == "":
		add(p, "%s: set tenant (every token's tenant) or claims.tenant (the claim naming it) with tenants", p)
	case j.Claims.Tenant != "" && j.Tenant != "":
		add(p+".tenant", "%s.tenant: set either tenant or claims.tenant, not both", p)
	case j.Claims.Tenant != "" && len(j.Tenants) == 0:
		add(p+".tenants", "%s.tenants: required with claims.tenant: the tenants a token may name (any other is refused)", p)
	case j.Tenant != "" && len(j.Tenants) > 0:
		add(p+".tenants", "%s.tenants: only with claims.tenant; tenant %q is every token's", p, j.Tenant)
	}
	switch {
	case j.AllowedRoles != nil && j.Claims.Roles == "":
		add(p+".allowedRoles", "%s.allowedRoles: only with claims.roles: without it a token has no roles", p)
	case j.AllowedRoles != nil && len(j.AllowedRoles) == 0:
		add(p+".allowedRoles", "%s.allowedRoles: must list at least one role (omit it to keep a token's roles, %s excepted)", p, RoleGlobalAdmin)
	}
	listed := map[string]bool{}
	for i, r := range j.AllowedRoles {
		field := fmt.Sprintf("%s.allowedRoles[%d]", p, i)
		switch {
		case strings.TrimSpace(r) != r || r == "":
			add(field, "%s: %q is not a role (empty or padded with spaces)", field, r)
		case listed[r]:
			add(field, "%s: role %q is listed twice", field, r)
		}
		listed[r] = true
	}
	seen := map[string]bool{}
	for i, t := range j.Tenants {
		field := fmt.Sprintf("%s.tenants[%d]", p, i)
		switch {
		case t == "":
			add(field, "%s: empty tenant", field)
		case seen[t]:
			add(field, "%s: tenant %q is listed twice", field, t)
		}
		seen[t] = true
	}
}

// checkJWKSURL accepts an absolute https URL, or http to a loopback
// address (a provider on the same host, tests).
func checkJWKSURL(s string) error {
	if s == "" {
		return fmt.Errorf("required: the provider's key set URL (its OpenID configuration's jwks_uri)")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL without user info or fragment", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("%q: http only to a loopback address; use https (keys fetched in the clear could be swapped)", s)
	}
	return fmt.Errorf("%q: the scheme must be https", s)
}

// jwtTenants are the tenants auth.jwt's tokens may belong to.
func (j *JWT) tenants() []string {
	switch {
	case j == nil:
		return nil
	case j.Tenant != "":
		return []string{j.Tenant}
	}
	return j.Tenants
}
