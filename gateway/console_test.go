package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/console"
)

// consoleSignIn signs in to g's console with key and returns the headers
// of a console request: the session cookie and the CSRF token.
func consoleSignIn(t *testing.T, g *testGateway, key string) []string {
	t.Helper()
	resp := g.do("POST", "/console/api/session", map[string]string{"key": key})
	defer resp.Body.Close()
	var s struct {
		CSRF string `json:"csrf"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		t.Fatalf("sign-in with %s: %d", key, resp.StatusCode)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("sign-in set %v", cookies)
	}
	return []string{"Cookie", cookies[0].Name + "=" + cookies[0].Value, console.CSRFHeader, s.CSRF}
}

func status(t *testing.T, g *testGateway, method, path string, body any, headers ...string) (int, string) {
	t.Helper()
	resp := g.do(method, path, body, headers...)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestConsoleRoutesRefuseStrangers walks every route of the API and the
// console: without a key or session, and with a forged or signed-out
// session cookie, each answers 401 (the console's sign-in page and its
// script excepted).
func TestConsoleRoutesRefuseStrangers(t *testing.T) {
	// debug.pprof on: its profiles need an admin too.
	g := newTestGateway(t, "approval", withApprovalKeys, func(cfg *config.Config) { cfg.Debug.Pprof = true })
	signedOut := consoleSignIn(t, g, opsKey)
	if code, body := status(t, g, "DELETE", "/console/api/session", nil, signedOut...); code != http.StatusNoContent {
		t.Fatalf("sign-out: %d %s", code, body)
	}
	param := regexp.MustCompile(`[:*][a-z]+`)
	// The WebSocket handshake authenticates itself after the upgrade
	// (ws_test.go); the others are public.
	public := []string{"/healthz", "/readyz", "/metrics", "/v1/agents/:agent/ws"}
	walked, pprof := 0, 0
	for _, rt := range g.srv.handler.(*gin.Engine).Routes() {
		if strings.HasPrefix(rt.Path, "/debug/pprof") {
			pprof++
		}
		if slices.ContainsFunc(public, func(p string) bool { return strings.HasPrefix(rt.Path, p) }) {
			continue
		}
		path := param.ReplaceAllString(strings.ReplaceAll(rt.Path, ":agent", "demo"), "x")
		if strings.HasPrefix(rt.Path, console.Path) {
			if rt.Method != http.MethodGet || rt.Path == console.Path {
				continue // the console routes every method itself
			}
			path = console.Path + "/app/app.js" // the signed-in pages; /console/ itself is the sign-in form
		}
		for _, who := range []struct {
			name    string
			headers []string
		}{
			{"nobody", nil},
			{"a forged cookie", []string{"Cookie", console.CookieName + "=forged", console.CSRFHeader, "forged"}},
			{"a signed-out session", signedOut},
		} {
			walked++
			if code, body := status(t, g, rt.Method, path, "{}", who.headers...); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d %s, want 401", rt.Method, path, who.name, code, body)
			}
		}
	}
	for _, p := range []string{"/console/api/session", "/console/app/approvals.js"} {
		if code, _ := status(t, g, "GET", p, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d", p, code)
		}
	}
	if walked < 60 || pprof == 0 {
		t.Fatalf("walked only %d requests, %d pprof routes", walked, pprof)
	}
	if code, body := status(t, g, "GET", "/console/", nil); code != http.StatusOK || !strings.Contains(body, "/console/static/main.js") {
		t.Errorf("the sign-in page: %d %s", code, body)
	}
}

// TestConsoleSessionOnTheAPI: the API takes the console's session cookie
// as it takes the key it was signed in with — tenant, roles and approval
// rules included — and refuses a request that changes something without
// the session's CSRF token. The Bearer path is unchanged.
func TestConsoleSessionOnTheAPI(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	chunks, _ := askApproval(t, g, "console", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	ops := consoleSignIn(t, g, opsKey)
	other := consoleSignIn(t, g, otherKey)

	if code, body := status(t, g, "GET", "/v1/approvals", nil, ops...); code != 200 || !strings.Contains(body, id) {
		t.Fatalf("ops's console lists %d %s", code, body)
	}
	if code, body := status(t, g, "GET", "/v1/approvals?state=all", nil, other...); code != 200 || strings.Contains(body, id) {
		t.Errorf("another tenant's admin lists %d %s", code, body)
	}
	if code, body := status(t, g, "POST", "/v1/approvals/"+id, map[string]any{"approved": true}, other...); code != http.StatusNotFound {
		t.Errorf("another tenant's admin decides: %d %s", code, body)
	}
	if code, _ := status(t, g, "GET", "/v1/admin/rules", nil, ops...); code != http.StatusForbidden {
		t.Errorf("an approver reads the admin API: %d", code)
	}
	if code, _ := status(t, g, "GET", "/v1/admin/rules", nil, other...); code != 200 {
		t.Errorf("an admin's console reads the admin API: %d", code)
	}
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"no CSRF token", ops[:2]},
		{"another session's CSRF token", []string{ops[0], ops[1], console.CSRFHeader, other[3]}},
		{"an empty CSRF token", []string{ops[0], ops[1], console.CSRFHeader, ""}},
	} {
		code, body := status(t, g, "POST", "/v1/approvals/"+id, map[string]any{"approved": true, "reason": "forged"}, tc.headers...)
		if code != http.StatusForbidden || !strings.Contains(body, console.CSRFHeader) {
			t.Errorf("%s: %d %s, want 403 naming %s", tc.name, code, body, console.CSRFHeader)
		}
	}
	if code, body := status(t, g, "POST", "/v1/admin/rules/reload", "{}", other[:2]...); code != http.StatusForbidden {
		t.Errorf("admin reload without CSRF: %d %s", code, body)
	}
	// A Bearer key wins over a cookie: the path scripts use is unchanged.
	if code, _ := status(t, g, "GET", "/v1/admin/rules", nil, append(bearer(userKey), other...)...); code != http.StatusForbidden {
		t.Errorf("a chat user's key with an admin's cookie: %d, want the key's 403", code)
	}
	code, body := status(t, g, "POST", "/v1/approvals/"+id, map[string]any{"approved": true, "reason": "checked"}, ops...)
	if code != 200 || !strings.Contains(body, `"state":"approved"`) || !strings.Contains(body, `"decidedBy":"olga"`) {
		t.Fatalf("ops approves from the console: %d %s", code, body)
	}
}

// TestConsoleWithoutKeys: the keyless gateway (the anonymous admin,
// loopback only) serves the console without sign-in, and still only to
// requests for its loopback name.
func TestConsoleWithoutKeys(t *testing.T) {
	g := newTestGateway(t, "basic")
	if code, body := status(t, g, "GET", "/console/api/session", nil); code != 200 || !strings.Contains(body, `"open":true`) {
		t.Fatalf("session: %d %s", code, body)
	}
	if code, _ := status(t, g, "GET", "/console/app/app.js", nil); code != 200 {
		t.Errorf("the console's pages: %d", code)
	}
	req, _ := http.NewRequest("GET", g.http.URL+"/console/app/app.js", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebound name: %d, want 403", resp.StatusCode)
	}
	if code, _ := status(t, g, "POST", "/console/api/session", map[string]string{"key": "x"}); code != http.StatusConflict {
		t.Errorf("sign-in without keys: %d, want 409", code)
	}
}
