package tests

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jwtTokens is the folder the jwt-auth example's identity provider wrote
// its tokens into (set by jwtIDP, read by its scenario, in the same subtest).
var jwtTokens string

// jwtIDP builds and starts the jwt-auth example's identity provider and
// returns the gateway's environment naming its port.
func jwtIDP(t *testing.T) []string {
	bin := filepath.Join(t.TempDir(), "idp")
	build := exec.Command("go", "build", "-o", bin, "./examples/jwt-auth/idp")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the idp: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	jwtTokens = t.TempDir()
	cmd := exec.Command(bin, "-listen", addr, "-out", jwtTokens)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+addr+"/jwks")
	_, port, _ := strings.Cut(addr, ":")
	return []string{"IDP_PORT=" + port}
}

// exampleJWTAuth: the IdP's valid token runs a turn as its principal
// beside the API key; expired, other-app, forged and unknown-tenant tokens
// are refused with their codes; only the admin token reaches the admin API.
func exampleJWTAuth(t *testing.T, x *exampleRun) {
	token := func(name string) string {
		b, err := os.ReadFile(filepath.Join(jwtTokens, name+".jwt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	call, ok := x.as(token("valid")).chat("assistant", userChat("jwt-1", "u1", "weather in Lima", nil)).toolCall("weather")
	if !ok || !strings.HasPrefix(string(call.Output), `{"city":"Lima"`) {
		t.Fatalf("valid token: weather call %+v", call)
	}
	if _, ok := x.as("ci-demo-6a1f0c9e3b7d48a2b5e4c1f09d8a7b36").chat("assistant", userChat("key-1", "u1", "weather in Oslo", nil)).toolCall("weather"); !ok {
		t.Fatal("the API key no longer works beside auth.jwt")
	}
	for _, tc := range []struct {
		token, code string
		status      int
	}{
		{"expired", "token_expired", http.StatusUnauthorized},
		{"wrong-aud", "token_audience", http.StatusUnauthorized},
		{"forged", "token_signature", http.StatusUnauthorized},
		{"other-tenant", "token_tenant", http.StatusForbidden},
	} {
		status, body, err := x.as(token(tc.token)).try(http.MethodGet, "/v1/admin/rules", nil)
		if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
			t.Errorf("%s token: %d %s, want %d %s", tc.token, status, body, tc.status, tc.code)
		}
	}
	if status, _, _ := x.as(token("valid")).try(http.MethodGet, "/v1/admin/rules", nil); status != http.StatusForbidden {
		t.Errorf("a user token on the admin API: %d, want 403", status)
	}
	if status, _, _ := x.as(token("admin")).try(http.MethodGet, "/v1/admin/rules", nil); status != http.StatusOK {
		t.Errorf("the admin token on the admin API: %d, want 200", status)
	}
}
