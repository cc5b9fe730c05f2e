package identity_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/identity"
	"github.com/turngate/turngate/gateway/identity/idptest"
)

// now is the tests' clock: tokens are issued around it.
var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// signer is an idptest.Signer with the test's failures.
type signer struct{ *idptest.Signer }

func newSigner(t testing.TB, kid string, alg jwa.SignatureAlgorithm) *signer {
	s, err := idptest.NewSigner(kid, alg)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{s}
}

func (s *signer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	tok, err := s.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// idp is a local identity provider serving a JWKS that tests can change.
type idp struct {
	srv *httptest.Server
	idptest.JWKS
}

func newIDP(t testing.TB, keys ...*signer) *idp {
	p := &idp{}
	for _, k := range keys {
		p.Add(k.Signer)
	}
	p.srv = httptest.NewServer(&p.JWKS)
	t.Cleanup(p.srv.Close)
	return p
}

const (
	issuer   = "https://idp.example.com/realms/acme"
	audience = "turngate"
)

func jwtConfig(url string) config.JWT {
	return config.JWT{
		Issuer: issuer, Audience: audience, JWKSURL: url,
		Algorithms: config.JWTAlgorithms, ClockSkew: 30 * time.Second,
		RefreshInterval: time.Hour, MinRefreshInterval: 30 * time.Second,
		Claims:  config.JWTClaims{Tenant: "org", Principal: "sub", Roles: "realm_access.roles"},
		Tenants: []string{"acme", "globex"},
	}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newAuth(t testing.TB, cfg config.JWT, clk *clock, log *slog.Logger) *identity.Authenticator {
	t.Helper()
	a, err := identity.New(cfg, identity.Options{Now: clk.now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// claims are a valid token's claims, with changes.
func claims(changes map[string]any) map[string]any {
	c := map[string]any{
		"iss": issuer, "aud": []string{audience, "account"}, "sub": "alice",
		"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "iat": now.Add(-time.Minute).Unix(),
		"org":          "acme",
		"realm_access": map[string]any{"roles": []string{"user", "admin"}},
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// unsigned returns header.payload. with the given header: alg none.
func unsigned(t testing.TB, header, payload map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "."
}

var keys = sync.OnceValue(func() map[string]*signer {
	t := &testing.T{}
	return map[string]*signer{
		"rsa": newSigner(t, "rsa-1", jwa.RS256()),
		"ec":  newSigner(t, "ec-1", jwa.ES256()),
		"ed":  newSigner(t, "ed-1", jwa.EdDSA()),
		// Same kid as rsa, another key: a forger's.
		"forger": newSigner(t, "rsa-1", jwa.RS256()),
		"rsa2":   newSigner(t, "rsa-2", jwa.RS256()),
	}
})

// TestAuthenticate is the table of what a token gets: its principal or
// the refusal's code.
func TestAuthenticate(t *testing.T) {
	k := keys()
	p := newIDP(t, k["rsa"], k["ec"], k["ed"])
	clk := &clock{t: now}
	var logs bytes.Buffer
	a := newAuth(t, jwtConfig(p.srv.URL), clk, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	pubPEM := func() []byte {
		var raw rsa.PublicKey
		if err := jwk.Export(k["rsa"].Public, &raw); err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKIXPublicKey(&raw)
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	hs256 := func(secret []byte) string {
		hdr := jws.NewHeaders()
		_ = hdr.Set(jws.KeyIDKey, "rsa-1")
		b, _ := json.Marshal(claims(nil))
		out, err := jws.Sign(b, jws.WithKey(jwa.HS256(), secret, jws.WithProtectedHeaders(hdr)))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	tampered := func() string {
		tok := k["rsa"].sign(t, claims(nil))
		parts := strings.Split(tok, ".")
		b, _ := json.Marshal(claims(map[string]any{"sub": "mallory", "realm_access": map[string]any{"roles": []string{"admin"}}}))
		parts[1] = base64.RawURLEncoding.EncodeToString(b)
		return strings.Join(parts, ".")
	}()
	admin := engine.Principal{Tenant: "acme", Subject: "alice", Roles: []string{"user", "admin"}}
	for _, tc := range []struct {
		name  string
		token string
		want  engine.Principal
		code  string
	}{
		{"valid RS256", k["rsa"].sign(t, claims(nil)), admin, ""},
		{"valid ES256", k["ec"].sign(t, claims(nil)), admin, ""},
		{"valid EdDSA", k["ed"].sign(t, claims(nil)), admin, ""},
		{"aud a single string", k["rsa"].sign(t, claims(map[string]any{"aud": audience})), admin, ""},
		{"roles as a scope string", k["rsa"].sign(t, claims(map[string]any{"realm_access": map[string]any{"roles": "user admin"}})), admin, ""},
		{"no roles claim", k["rsa"].sign(t, claims(map[string]any{"realm_access": nil})), engine.Principal{Tenant: "acme", Subject: "alice", Roles: []string{}}, ""},
		{"other configured tenant", k["rsa"].sign(t, claims(map[string]any{"org": "globex"})), engine.Principal{Tenant: "globex", Subject: "alice", Roles: []string{"user", "admin"}}, ""},
		{"within clock skew of exp", k["rsa"].sign(t, claims(map[string]any{"exp": now.Add(-20 * time.Second).Unix()})), admin, ""},
		{"expired", k["rsa"].sign(t, claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})), engine.Principal{}, identity.CodeExpired},
		{"not yet valid", k["rsa"].sign(t, claims(map[string]any{"nbf": now.Add(time.Minute).Unix()})), engine.Principal{}, identity.CodeNotYetValid},
		{"no exp", k["rsa"].sign(t, claims(map[string]any{"exp": nil})), engine.Principal{}, identity.CodeClaims},
		{"wrong issuer", k["rsa"].sign(t, claims(map[string]any{"iss": "https://evil.example.com"})), engine.Principal{}, identity.CodeIssuer},
		{"wrong audience", k["rsa"].sign(t, claims(map[string]any{"aud": "other-app"})), engine.Principal{}, identity.CodeAudience},
		{"unknown key", newSigner(t, "nobody", jwa.RS256()).sign(t, claims(nil)), engine.Principal{}, identity.CodeUnknownKey},
		{"forged signature (same kid, another key)", k["forger"].sign(t, claims(nil)), engine.Principal{}, identity.CodeSignature},
		{"payload changed after signing", tampered, engine.Principal{}, identity.CodeSignature},
		{"alg none", unsigned(t, map[string]any{"alg": "none", "kid": "rsa-1"}, claims(nil)), engine.Principal{}, identity.CodeAlgorithm},
		{"alg none without a kid", unsigned(t, map[string]any{"alg": "none"}, claims(nil)), engine.Principal{}, identity.CodeAlgorithm},
		{"HS256 with the public key as secret", hs256(pubPEM), engine.Principal{}, identity.CodeAlgorithm},
		{"RS256 token on an EC key's kid", func() string {
			s, err := k["rsa"].WithKID("ec-1")
			if err != nil {
				t.Fatal(err)
			}
			return (&signer{s}).sign(t, claims(nil))
		}(), engine.Principal{}, identity.CodeSignature},
		{"unknown tenant", k["rsa"].sign(t, claims(map[string]any{"org": "initech"})), engine.Principal{}, identity.CodeTenant},
		{"no tenant claim", k["rsa"].sign(t, claims(map[string]any{"org": nil})), engine.Principal{}, identity.CodeClaims},
		{"tenant not a string", k["rsa"].sign(t, claims(map[string]any{"org": 7})), engine.Principal{}, identity.CodeClaims},
		{"roles not strings", k["rsa"].sign(t, claims(map[string]any{"realm_access": map[string]any{"roles": []any{"user", 1}}})), engine.Principal{}, identity.CodeClaims},
		{"no sub", k["rsa"].sign(t, claims(map[string]any{"sub": nil})), engine.Principal{}, identity.CodeClaims},
		{"not a JWT", "abc.def", engine.Principal{}, identity.CodeMalformed},
		{"garbage parts", "a.b.c", engine.Principal{}, identity.CodeMalformed},
		{"JSON serialization", `{"payload":"e30","signatures":[]}`, engine.Principal{}, identity.CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := a.Authenticate(context.Background(), tc.token)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got.Tenant != tc.want.Tenant || got.Subject != tc.want.Subject || !slices.Equal(got.Roles, tc.want.Roles) {
					t.Fatalf("principal %+v, want %+v", got, tc.want)
				}
				return
			}
			var ie *identity.Error
			if !errors.As(err, &ie) {
				t.Fatalf("got %+v, %v; want refusal %s", got, err, tc.code)
			}
			if ie.Code != tc.code {
				t.Fatalf("code %s (%s), want %s", ie.Code, ie.Message, tc.code)
			}
			wantStatus := http.StatusUnauthorized
			if tc.code == identity.CodeTenant {
				wantStatus = http.StatusForbidden
			}
			if ie.Status != wantStatus {
				t.Errorf("status %d, want %d", ie.Status, wantStatus)
			}
			for _, part := range strings.Split(tc.token, ".") {
				if len(part) > 8 && strings.Contains(ie.Message, part) {
					t.Errorf("message %q holds a part of the token", ie.Message)
				}
			}
		})
	}
	if logs.Len() > 0 {
		t.Logf("logs:\n%s", logs.String())
	}
}

// TestKeyRotation: a key the provider publishes after startup is used
// without a restart, and the unknown kids of forged tokens refresh the
// JWKS at most once per minRefreshInterval.
func TestKeyRotation(t *testing.T) {
	k := keys()
	p := newIDP(t, k["rsa"])
	clk := &clock{t: now}
	a := newAuth(t, jwtConfig(p.srv.URL), clk, nil)
	ctx := context.Background()
	if _, _, err := a.Authenticate(ctx, k["rsa"].sign(t, claims(nil))); err != nil {
		t.Fatal(err)
	}
	fetched := p.Fetches.Load()

	// Forged kids: the first refreshes the set, the next ones within
	// minRefreshInterval do not.
	forged := newSigner(t, "forged", jwa.ES256())
	for i := range 20 {
		_, _, err := a.Authenticate(ctx, forged.sign(t, claims(nil)))
		if ie := (*identity.Error)(nil); !errors.As(err, &ie) || ie.Code != identity.CodeUnknownKey {
			t.Fatalf("forged kid %d: %v", i, err)
		}
	}
	if got := p.Fetches.Load() - fetched; got != 1 {
		t.Fatalf("20 forged kids fetched the JWKS %d times, want 1", got)
	}

	// The provider rotates: rsa-2 appears. Once minRefreshInterval has
	// passed, its first token refreshes the set and is accepted.
	p.Add(k["rsa2"].Signer)
	clk.add(31 * time.Second)
	c := claims(map[string]any{"exp": clk.now().Add(5 * time.Minute).Unix()})
	got, _, err := a.Authenticate(ctx, k["rsa2"].sign(t, c))
	if err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if got.Subject != "alice" {
		t.Fatalf("principal %+v", got)
	}
	// The old key still works while the provider publishes it.
	if _, _, err := a.Authenticate(ctx, k["rsa"].sign(t, c)); err != nil {
		t.Fatalf("old key after rotation: %v", err)
	}
}

// TestProviderDown: a JWKS that cannot be fetched refuses tokens with 503
// identity_unavailable, not as forged.
func TestProviderDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	clk := &clock{t: now}
	a, err := identity.New(jwtConfig(srv.URL), identity.Options{Now: clk.now, Logger: slog.New(slog.DiscardHandler), FirstFetchWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, _, err = a.Authenticate(context.Background(), keys()["rsa"].sign(t, claims(nil)))
	if ie := (*identity.Error)(nil); !errors.As(err, &ie) || ie.Code != identity.CodeUnavailable || ie.Status != http.StatusServiceUnavailable {
		t.Fatalf("got %v, want 503 identity_unavailable", err)
	}
}

// TestFixedTenant: auth.jwt.tenant gives every token that tenant.
func TestFixedTenant(t *testing.T) {
	k := keys()
	p := newIDP(t, k["ed"])
	cfg := jwtConfig(p.srv.URL)
	cfg.Claims.Tenant, cfg.Tenants, cfg.Tenant = "", nil, "acme"
	cfg.Claims.Roles = `"https://example.com/roles"`
	a := newAuth(t, cfg, &clock{t: now}, nil)
	got, _, err := a.Authenticate(context.Background(), k["ed"].sign(t, claims(map[string]any{"org": "ignored", "https://example.com/roles": []string{"ops"}})))
	if err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || !slices.Equal(got.Roles, []string{"ops"}) {
		t.Fatalf("principal %+v", got)
	}
}

// FuzzAuthenticate: any bearer credential is a principal or an *Error
// (never a panic), and a refusal's message never holds the credential.
func FuzzAuthenticate(f *testing.F) {
	k := keys()
	p := newIDP(f, k["rsa"], k["ed"])
	a := newAuth(f, jwtConfig(p.srv.URL), &clock{t: now}, slog.New(slog.DiscardHandler))
	for _, tok := range []string{
		k["rsa"].sign(f, claims(nil)), k["ed"].sign(f, claims(map[string]any{"realm_access": "x"})),
		unsigned(f, map[string]any{"alg": "none"}, claims(nil)), "a.b.c", "..", "e30.e30.",
	} {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		_, _, err := a.Authenticate(context.Background(), tok)
		if err == nil {
			return
		}
		var ie *identity.Error
		if !errors.As(err, &ie) {
			t.Fatalf("not an *identity.Error: %v", err)
		}
		if len(tok) > 16 && strings.Contains(ie.Message, tok) {
			t.Fatalf("message %q holds the token", ie.Message)
		}
	})
}

// TestAllowedRoles: auth.jwt.allowedRoles keeps the roles it lists and
// drops the others; global-admin from a token counts only when listed.
func TestAllowedRoles(t *testing.T) {
	k := keys()
	p := newIDP(t, k["ed"])
	roles := map[string]any{"realm_access": map[string]any{"roles": []string{"user", "admin", "global-admin", "root"}}}
	for _, tc := range []struct {
		name    string
		allowed []string
		want    []string
	}{
		{"no list: every role but global-admin", nil, []string{"user", "admin", "root"}},
		{"list without global-admin", []string{"admin", "user"}, []string{"user", "admin"}},
		{"global-admin listed", []string{"admin", "global-admin"}, []string{"admin", "global-admin"}},
		{"none listed is held", []string{"auditor"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := jwtConfig(p.srv.URL)
			cfg.AllowedRoles = tc.allowed
			a := newAuth(t, cfg, &clock{t: now}, nil)
			got, _, err := a.Authenticate(context.Background(), k["ed"].sign(t, claims(roles)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Roles, tc.want) {
				t.Fatalf("roles %q, want %q", got.Roles, tc.want)
			}
		})
	}
}
