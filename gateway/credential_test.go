package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/console"
	"github.com/turngate/turngate/gateway/identity"
)

// consoleAttempt signs in to g's console with credential: the response's
// status, error code, and the headers of a console request with its
// session (nil when refused).
func consoleAttempt(t *testing.T, g *testGateway, credential string) (int, string, *http.Cookie, []string) {
	t.Helper()
	resp := g.do("POST", "/console/api/session", map[string]string{"key": credential})
	defer resp.Body.Close()
	var body struct{ Code, CSRF string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, body.Code, nil, nil
	}
	ck := resp.Cookies()[0]
	return resp.StatusCode, "", ck, []string{"Cookie", ck.Name + "=" + ck.Value, console.CSRFHeader, body.CSRF}
}

// TestConsoleSessionEndsWithCredential: a console session signed in with
// a JWT ends at the token's exp (its cookie says so), one signed in with
// an API key ends when a config reload removes the key, and a refused
// token gets the bearer path's code.
func TestConsoleSessionEndsWithCredential(t *testing.T) {
	g := newJWTGateway(t)
	admin := map[string]any{"realm_access": map[string]any{"roles": []string{"admin"}}}

	t.Run("jwt session ends at exp", func(t *testing.T) {
		exp := time.Now().Add(3 * time.Second).Truncate(time.Second)
		tok := g.token(t, map[string]any{"exp": exp.Unix(), "realm_access": admin["realm_access"]})
		code, _, ck, session := consoleAttempt(t, g.testGateway, tok)
		if code != http.StatusOK {
			t.Fatalf("sign-in: %d", code)
		}
		if ck.Expires.After(exp) || ck.MaxAge <= 0 || time.Now().Add(time.Duration(ck.MaxAge)*time.Second).After(exp.Add(time.Second)) {
			t.Errorf("cookie Expires %v Max-Age %d outlive the token's exp %v", ck.Expires, ck.MaxAge, exp)
		}
		if code, body := status(t, g.testGateway, "GET", "/v1/admin/rules", nil, session...); code != http.StatusOK {
			t.Fatalf("admin with the session: %d %s", code, body)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, _ := status(t, g.testGateway, "GET", "/v1/admin/rules", nil, session...)
			if code == http.StatusUnauthorized {
				break
			}
			if code != http.StatusOK || time.Now().After(deadline) {
				t.Fatalf("the session outlived its token: %d", code)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if now := time.Now(); now.Before(exp) {
			t.Errorf("the session ended at %v, before the token's exp %v", now, exp)
		}
	})

	t.Run("refused tokens keep their code", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			claims map[string]any
			status int
			code   string
		}{
			{"expired", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}, http.StatusUnauthorized, identity.CodeExpired},
			{"wrong issuer", map[string]any{"iss": "https://evil.example.com"}, http.StatusUnauthorized, identity.CodeIssuer},
			{"unknown tenant", map[string]any{"org": "initech"}, http.StatusForbidden, identity.CodeTenant},
		} {
			if code, got, _, _ := consoleAttempt(t, g.testGateway, g.token(t, tc.claims)); code != tc.status || got != tc.code {
				t.Errorf("%s: sign-in %d %s, want %d %s", tc.name, code, got, tc.status, tc.code)
			}
		}
	})

	t.Run("key removed by a reload ends its session", func(t *testing.T) {
		kept := config.APIKey{Key: "0a1b2c3d4e5f60718293a4b5c6d7e8f9", Tenant: "acme", Subject: "ops", Roles: []string{"admin"}}
		if err := g.srv.ApplyConfig(jwtConfig(t, g.srv.conf().Auth.JWT.JWKSURL, jwtKey, kept)); err != nil {
			t.Fatal(err)
		}
		_, _, _, removed := consoleAttempt(t, g.testGateway, jwtKey.Key)
		_, _, _, stays := consoleAttempt(t, g.testGateway, kept.Key)
		if removed == nil || stays == nil {
			t.Fatal("sign-in refused")
		}
		if err := g.srv.ApplyConfig(jwtConfig(t, g.srv.conf().Auth.JWT.JWKSURL, kept)); err != nil {
			t.Fatal(err)
		}
		if code, _ := status(t, g.testGateway, "GET", "/v1/admin/rules", nil, "Authorization", "Bearer "+jwtKey.Key); code != http.StatusUnauthorized {
			t.Errorf("removed key as bearer: %d, want 401", code)
		}
		for _, tc := range []struct {
			name    string
			headers []string
			want    int
		}{{"removed key's session", removed, http.StatusUnauthorized}, {"kept key's session", stays, http.StatusOK}} {
			if code, body := status(t, g.testGateway, "GET", "/v1/admin/rules", nil, tc.headers...); code != tc.want {
				t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
			}
			if code, _ := status(t, g.testGateway, "GET", "/console/api/session", nil, tc.headers...); code != tc.want {
				t.Errorf("%s: GET /console/api/session %d, want %d", tc.name, code, tc.want)
			}
		}
	})
}

// TestConsoleSignInIdentityUnavailable: a sign-in while the identity
// provider cannot be reached is a 503 identity_unavailable, and is not
// counted as a failed sign-in (no 429 however many).
func TestConsoleSignInIdentityUnavailable(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	g := startGateway(t, jwtConfig(t, down.URL, jwtKey), Options{})
	tok := newJWTGateway(t).token(t, nil) // signed by a key g cannot fetch
	for i := range console.SignInFailuresPerMinute + 2 {
		if code, got, _, _ := consoleAttempt(t, g, tok); code != http.StatusServiceUnavailable || got != identity.CodeUnavailable {
			t.Fatalf("sign-in %d: %d %s, want 503 %s", i+1, code, got, identity.CodeUnavailable)
		}
	}
}

// TestWSHandshakeCredentialRechecked: a WebSocket connection authenticated
// at the handshake serves requests while its credential authenticates; a
// request after its JWT's exp, or after a config reload removed its API
// key, gets a 401 error frame and the connection closes with 1008, while
// a connection whose key the reload kept goes on.
func TestWSHandshakeCredentialRechecked(t *testing.T) {
	g := newJWTGateway(t)
	kept := config.APIKey{Key: "0a1b2c3d4e5f60718293a4b5c6d7e8f9", Tenant: "acme", Subject: "ops", Roles: []string{"admin"}}
	if err := g.srv.ApplyConfig(jwtConfig(t, g.srv.conf().Auth.JWT.JWKSURL, jwtKey, kept)); err != nil {
		t.Fatal(err)
	}
	dial := func(credential string) *wsClient {
		c, code := g.tryDialWS(t, "", &websocket.DialOptions{Subprotocols: []string{wsSubprotocol, wsKeyProtocol + credential}})
		if code != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %d", code)
		}
		return c
	}
	// refused checks that request id gets a 401 error frame with code,
	// then the close 1008.
	refused := func(t *testing.T, c *wsClient, id, code string) {
		t.Helper()
		c.write(sendFrame(id, "ws-"+id, "m-"+id, "hello", nil))
		r := c.collect(id)
		if r.end != "error" || r.err["status"] != float64(http.StatusUnauthorized) || r.err["code"] != code {
			t.Fatalf("%s: ended %s %v, want a 401 %s error frame", id, r.end, r.err, code)
		}
		if _, err := c.readFrame(); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Fatalf("%s: after the refusal: %v, want close 1008", id, err)
		}
	}

	t.Run("jwt refused after exp", func(t *testing.T) {
		exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
		c := dial(g.token(t, map[string]any{"exp": exp.Unix()}))
		c.turn("before", sendFrame("before", "ws-jwt", "m1", "hello", nil))
		// The bearer path accepts the token until exp plus the clock skew.
		for time.Now().Before(exp.Add(g.srv.conf().Auth.JWT.ClockSkew + time.Second)) {
			time.Sleep(100 * time.Millisecond)
		}
		refused(t, c, "after", identity.CodeExpired)
	})

	t.Run("key removed by a reload", func(t *testing.T) {
		removed, stays := dial(jwtKey.Key), dial(kept.Key)
		removed.turn("r1", sendFrame("r1", "ws-removed", "m1", "hello", nil))
		stays.turn("s1", sendFrame("s1", "ws-kept", "m1", "hello", nil))
		if err := g.srv.ApplyConfig(jwtConfig(t, g.srv.conf().Auth.JWT.JWKSURL, kept)); err != nil {
			t.Fatal(err)
		}
		refused(t, removed, "r2", CodeUnauthorized)
		stays.turn("s2", sendFrame("s2", "ws-kept", "m2", "hello again", nil))
	})
}
