package config

import (
	"strings"
	"testing"
)

// TestJWTConfig: auth.jwt's mistakes are positioned errors, and none nor
// HMAC can never be listed.
func TestJWTConfig(t *testing.T) {
	base := "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}]\nauth:\n  jwt:\n"
	for _, tc := range []struct{ name, jwt, want string }{
		{"valid", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, claims: {tenant: org, roles: realm_access.roles}, tenants: [acme]}", ""},
		{"fixed tenant", "    {issuer: https://idp, audience: tg, jwksURL: http://127.0.0.1:8080/certs, tenant: acme}", ""},
		{"alg none", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, algorithms: [RS256, none]}",
			`line 6 col 103: auth.jwt.algorithms[1]: "none" is never accepted`},
		{"hmac", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, algorithms: [HS256]}",
			`line 6 col 96: auth.jwt.algorithms[0]: "HS256" (HMAC) is never accepted`},
		{"typo alg", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, algorithms: [ES265]}",
			`auth.jwt.algorithms[0]: "ES265" is not one of RS256, ES256, EdDSA (did you mean "ES256"?)`},
		{"http jwks", "    {issuer: https://idp, audience: tg, jwksURL: http://idp.example.com/certs, tenant: acme}",
			`auth.jwt.jwksURL: "http://idp.example.com/certs": http only to a loopback address`},
		{"no issuer", "    {audience: tg, jwksURL: https://idp/certs, tenant: acme}", "auth.jwt.issuer: required"},
		{"no tenant", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs}", "auth.jwt: set tenant"},
		{"claim tenant without tenants", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, claims: {tenant: org}}", "auth.jwt.tenants: required with claims.tenant"},
		{"bad claim path", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, claims: {roles: \"a..b\"}}", "auth.jwt.claims.roles: claim path \"a..b\": empty name at offset 2"},
		{"skew too large", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, clockSkew: 1h}", "auth.jwt.clockSkew: at most 5m0s"},
		{"allowed roles", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, claims: {roles: groups}, allowedRoles: [admin, global-admin]}", ""},
		{"allowed roles without claims.roles", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, allowedRoles: [admin]}",
			"line 6 col 97: auth.jwt.allowedRoles: only with claims.roles"},
		{"empty allowed roles", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, claims: {roles: groups}, allowedRoles: []}",
			"auth.jwt.allowedRoles: must list at least one role"},
		{"allowed role twice", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, claims: {roles: groups}, allowedRoles: [admin, admin]}",
			`line 6 col 130: auth.jwt.allowedRoles[1]: role "admin" is listed twice`},
		{"unknown key", "    {issuer: https://idp, audience: tg, jwksURL: https://idp/certs, tenant: acme, audiences: [x]}", `unknown key "audiences"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("turngate.yaml", []byte(base+tc.jwt+"\n"), env(nil))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !c.Authenticated() || len(c.Auth.JWT.Algorithms) != 3 || c.Auth.JWT.Claims.Principal != "sub" {
					t.Fatalf("defaults not applied: %+v", c.Auth.JWT)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
