package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/identity"
	"github.com/turngate/turngate/gateway/identity/idptest"
	"github.com/turngate/turngate/internal/syncbuf"
)

// jwtGateway is a gateway with an API key and auth.jwt against a local
// identity provider; it logs at debug level into logs.
type jwtGateway struct {
	*testGateway
	signer *idptest.Signer
	jwks   *idptest.JWKS
	logs   *syncbuf.Buffer
}

const jwtIssuer = "https://idp.example.com"

func newJWTGateway(t *testing.T) *jwtGateway {
	t.Helper()
	signer, err := idptest.NewSigner("k1", jwa.ES256())
	if err != nil {
		t.Fatal(err)
	}
	jwks := &idptest.JWKS{}
	jwks.Add(signer)
	idp := httptest.NewServer(jwks)
	t.Cleanup(idp.Close)
	logs := &syncbuf.Buffer{}
	g := startGateway(t, jwtConfig(t, idp.URL, jwtKey), Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return &jwtGateway{testGateway: g, signer: signer, jwks: jwks, logs: logs}
}

// jwtKey is the API key of newJWTGateway's configuration (an admin).
var jwtKey = config.APIKey{Key: "7f3c9a2b4e8d1f60aa11bb22cc33dd44", Tenant: "acme", Subject: "ci", Roles: []string{"admin"}}

// jwtConfig is the validated "basic" configuration with keys and auth.jwt
// against the JWKS at jwksURL.
func jwtConfig(t *testing.T, jwksURL string, keys ...config.APIKey) *config.Config {
	t.Helper()
	cfg := testConfig(t, "basic")
	cfg.Auth.APIKeys = keys
	cfg.Auth.JWT = &config.JWT{Issuer: jwtIssuer, Audience: "turngate", JWKSURL: jwksURL, Algorithms: config.JWTAlgorithms,
		ClockSkew: time.Second, RefreshInterval: time.Hour, MinRefreshInterval: time.Minute,
		Claims: config.JWTClaims{Tenant: "org", Principal: "sub", Roles: "realm_access.roles"}, Tenants: []string{"acme"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// token signs claims over a valid token's.
func (g *jwtGateway) token(t *testing.T, changes map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": jwtIssuer, "aud": "turngate", "sub": "alice", "org": "acme",
		"exp": time.Now().Add(time.Hour).Unix(), "realm_access": map[string]any{"roles": []string{"user"}}}
	for k, v := range changes {
		c[k] = v
	}
	tok, err := g.signer.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJWTBearer: a valid token is a principal on the AI SDK, OpenAI and
// WebSocket paths beside the API key; every refusal is the path's error
// body with a specific code, and no log line holds a token.
func TestJWTBearer(t *testing.T) {
	g := newJWTGateway(t)
	valid := g.token(t, nil)
	expired := g.token(t, map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})
	forged, err := idptest.NewSigner("k1", jwa.ES256())
	if err != nil {
		t.Fatal(err)
	}
	forgedTok, _ := forged.Sign(map[string]any{"iss": jwtIssuer, "aud": "turngate", "sub": "mallory", "org": "acme", "exp": time.Now().Add(time.Hour).Unix()})
	tokens := []string{valid, expired, forgedTok}

	for _, tc := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"valid token", valid, http.StatusOK, ""},
		{"api key still works", "7f3c9a2b4e8d1f60aa11bb22cc33dd44", http.StatusOK, ""},
		{"expired", expired, http.StatusUnauthorized, identity.CodeExpired},
		{"wrong audience", g.token(t, map[string]any{"aud": "other"}), http.StatusUnauthorized, identity.CodeAudience},
		{"forged signature", forgedTok, http.StatusUnauthorized, identity.CodeSignature},
		{"unknown tenant", g.token(t, map[string]any{"org": "initech"}), http.StatusForbidden, identity.CodeTenant},
		{"wrong api key", "not-a-key", http.StatusUnauthorized, CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.key = tc.token
			// AI SDK path: the JSON error body.
			resp := g.do("POST", "/v1/agents/demo/chat", chatBody("jwt-"+strings.ReplaceAll(tc.name, " ", "-"), "u1", "hello"))
			if resp.StatusCode != tc.status {
				t.Fatalf("chat: status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.code == "" {
				readUIStream(t, resp)
			} else {
				var body map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if body["code"] != tc.code {
					t.Errorf("chat: body %v, want code %s", body, tc.code)
				}
			}
			// OpenAI path: OpenAI's error shape.
			resp = g.do("GET", "/v1/models", nil)
			var oai struct {
				Error struct{ Code, Type, Message string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&oai)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("models: status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.code != "" {
				wantType := "authentication_error"
				if tc.status == http.StatusForbidden {
					wantType = "permission_error"
				}
				if oai.Error.Code != tc.code || oai.Error.Type != wantType {
					t.Errorf("models: error %+v, want code %s type %s", oai.Error, tc.code, wantType)
				}
			}
			// WebSocket: the credential as a handshake subprotocol.
			g.key = ""
			_, status := g.tryDialWS(t, "", &websocket.DialOptions{Subprotocols: []string{wsSubprotocol, wsKeyProtocol + tc.token}})
			want := tc.status
			if want == http.StatusOK {
				want = http.StatusSwitchingProtocols
			}
			if status != want {
				t.Errorf("websocket handshake: status %d, want %d", status, want)
			}
		})
	}
	g.key = ""

	// Admin needs the admin role: the token's roles are only "user".
	resp := g.do("GET", "/v1/admin/rules", nil, "Authorization", "Bearer "+valid)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("admin with a user token: %d, want 403", resp.StatusCode)
	}

	logs := g.logs.String()
	if !strings.Contains(logs, identity.CodeExpired) {
		t.Errorf("the refusals were not logged:\n%s", logs)
	}
	for _, tok := range tokens {
		for _, part := range strings.Split(tok, ".") {
			if strings.Contains(logs, part) {
				t.Fatalf("a log line holds a token part %q:\n%s", part, logs)
			}
		}
	}
}
