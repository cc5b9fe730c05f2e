package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// wrongTenantRequest is what TestConsoleRoutesRefuseOtherTenants sends to
// one route, naming tenant acme's records, and the status it wants.
type wrongTenantRequest struct {
	path string
	// body is sent as JSON; a func() any is called for each request.
	body   any
	status int
	// creates marks a request that makes the caller's own records (a
	// turn, a message) under acme's ids: sent after every other route,
	// so the lookups of acme's ids find nothing of the caller's.
	creates bool
}

// TestConsoleRoutesRefuseOtherTenants walks every route of the API as
// tenant globex's admin — with its key and with its console session —
// naming the records of tenant acme (its session, approval, decision,
// kill switch): each lookup is a 404, each list holds none of acme's,
// a fleet-wide action (a rules reload) is a 403, and no answer carries
// anything of acme's; afterwards acme's records are as they were.
func TestConsoleRoutesRefuseOtherTenants(t *testing.T) {
	const acmeAdmin = "acme-admin-key-0001"
	cfg := testConfig(t, "approval")
	withApprovalKeys(cfg)
	cfg.Auth.APIKeys = append(cfg.Auth.APIKeys, config.APIKey{Key: acmeAdmin, Tenant: "acme", Subject: "sam", Roles: []string{RoleAdmin}})
	cfg.Audit.Sink = config.SinkStdout // the decision records carry their input
	g := startGateway(t, cfg, Options{})

	// Tenant acme's records: a session holding an approval for a path
	// only acme knows, a saved session, their decisions, a kill switch.
	const secret = "acme-secret-7f3e"
	chunks, _ := askApproval(t, g, "s-held", "/big/"+secret, bearer(userKey)...)
	approval := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	g.doJSON("POST", "/v1/agents/demo/sessions/s-saved/messages", map[string]any{"text": "note " + secret}, http.StatusOK, nil, bearer(userKey)...)
	var ks struct {
		ID string `json:"id"`
	}
	g.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "tools": []string{"never*"}, "allowUnknownTools": true, "scope": map[string]any{"tenant": "acme"}, "reason": "acme incident"},
		http.StatusCreated, &ks, bearer(acmeAdmin)...)
	storedDecisions(t, g)
	acmeDecisions := list(t, g.as(acmeAdmin), "session=s-held").Decisions
	if len(acmeDecisions) == 0 {
		t.Fatal("acme's turn stored no decision")
	}
	acmeState := func() string {
		var b strings.Builder
		for _, p := range []string{"/v1/agents/demo/sessions/s-held/messages", "/v1/agents/demo/sessions/s-saved/messages", "/v1/agents/demo/sessions",
			"/v1/approvals?state=pending", "/v1/admin/killswitch", "/v1/admin/decisions/" + acmeDecisions[0].ID} {
			_, body := status(t, g, "GET", p, nil, bearer(acmeAdmin)...)
			b.WriteString(body)
		}
		return b.String()
	}
	before := acmeState()
	if !strings.Contains(before, approval) || !strings.Contains(before, secret) || !strings.Contains(before, "acme incident") {
		t.Fatalf("acme's records as its admin sees them: %s", before)
	}

	held := "/v1/agents/demo/sessions/s-held"
	eval := map[string]any{"hook": "beforeToolCall", "input": map[string]any{"type": "tool-call", "toolCallId": "c1", "toolName": "delete",
		"input": map[string]any{"path": "/tmp/x"}, "tool": map[string]any{"name": "delete"}}}
	sent := 0 // globex's chat messages: each new
	candidate := map[string]any{"files": map[string]string{"tools.rego": "package turngate.tool_call\n"}}
	requests := map[string]wrongTenantRequest{
		"POST /v1/agents/:agent/chat":                         {path: "/v1/agents/demo/chat", body: func() any { sent++; return chatBody("s-held", fmt.Sprintf("u-globex-%d", sent), "what is pending?") }, status: http.StatusOK, creates: true},
		"GET /v1/agents/:agent/chat/:id/stream":               {path: "/v1/agents/demo/chat/s-held/stream", status: http.StatusNotFound},
		"POST /v1/agents/:agent/sessions/:id/messages":        {path: held + "/messages", body: map[string]any{"text": "mine"}, status: http.StatusOK, creates: true},
		"GET /v1/agents/:agent/sessions/:id/messages":         {path: held + "/messages", status: http.StatusNotFound},
		"POST /v1/agents/:agent/sessions/:id/continue":        {path: held + "/continue", body: map[string]any{}, status: http.StatusNotFound},
		"POST /v1/agents/:agent/sessions/:id/cancel":          {path: held + "/cancel", body: map[string]any{}, status: http.StatusNotFound},
		"GET /v1/agents/:agent/sessions/:id/submissions/:sid": {path: held + "/submissions/sub_x", status: http.StatusNotFound},
		"GET /v1/approvals":                                   {path: "/v1/approvals?state=all", status: http.StatusOK},
		"GET /v1/approvals/:id":                               {path: "/v1/approvals/" + approval, status: http.StatusNotFound},
		"POST /v1/approvals/:id":                              {path: "/v1/approvals/" + approval, body: map[string]any{"approved": true, "reason": "not mine"}, status: http.StatusNotFound},
		"DELETE /v1/agents/:agent/sessions/:id/submissions":   {path: held + "/submissions", status: http.StatusNotFound},
		"GET /v1/agents":                                      {path: "/v1/agents", status: http.StatusOK},
		"GET /v1/agents/:agent/sessions":                      {path: "/v1/agents/demo/sessions", status: http.StatusOK},
		"GET /v1/agents/:agent/sessions/:id/export":           {path: held + "/export", status: http.StatusNotFound},
		"DELETE /v1/agents/:agent/sessions/:id":               {path: held, status: http.StatusNotFound},
		"POST /v1/chat/completions":                           {path: "/v1/chat/completions", body: map[string]any{"model": "demo", "user": "s-held", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, status: http.StatusOK, creates: true},
		"GET /v1/models":                                      {path: "/v1/models", status: http.StatusOK},
		"GET /v1/models/*model":                               {path: "/v1/models/demo", status: http.StatusOK},
		"POST /v1/messages":                                   {path: "/v1/messages", body: map[string]any{"model": "demo", "max_tokens": 64, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, status: http.StatusOK, creates: true},
		"GET /v1/admin/rules":                                 {path: "/v1/admin/rules", status: http.StatusOK},
		"POST /v1/admin/rules/reload":                         {path: "/v1/admin/rules/reload", body: map[string]any{}, status: http.StatusForbidden},
		"GET /v1/admin/config":                                {path: "/v1/admin/config", status: http.StatusForbidden},
		"POST /v1/admin/rules/eval":                           {path: "/v1/admin/rules/eval", body: eval, status: http.StatusOK},
		"POST /v1/admin/killswitch":                           {path: "/v1/admin/killswitch", body: map[string]any{"block": "tools", "scope": map[string]any{"tenant": "acme"}, "reason": "x"}, status: http.StatusForbidden},
		"GET /v1/admin/killswitch":                            {path: "/v1/admin/killswitch", status: http.StatusOK},
		"DELETE /v1/admin/killswitch/:id":                     {path: "/v1/admin/killswitch/" + ks.ID, status: http.StatusNotFound},
		"GET /v1/admin/decisions":                             {path: "/v1/admin/decisions?tenant=acme", status: http.StatusOK},
		"GET /v1/admin/decisions/:id":                         {path: "/v1/admin/decisions/" + acmeDecisions[0].ID, status: http.StatusNotFound},
		"POST /v1/admin/replay":                               {path: "/v1/admin/replay", body: map[string]any{"candidate": candidate, "since": time.Now().Add(-time.Hour).UTC()}, status: http.StatusOK},
	}
	// The WebSocket authenticates after its upgrade (ws_test.go); the
	// console's own routes serve its pages and the caller's session.
	skip := []string{"/healthz", "/readyz", "/metrics", "/v1/agents/:agent/ws", console.Path}
	var routes []gin.RouteInfo
	for _, rt := range g.srv.handler.(*gin.Engine).Routes() {
		if slices.ContainsFunc(skip, func(p string) bool { return strings.HasPrefix(rt.Path, p) }) {
			continue
		}
		if _, ok := requests[rt.Method+" "+rt.Path]; !ok {
			t.Errorf("%s %s: no wrong-tenant request for this route; add one to the table", rt.Method, rt.Path)
			continue
		}
		routes = append(routes, rt)
	}
	principals := []struct {
		name    string
		headers []string
	}{
		{"globex's admin key", bearer(otherKey)},
		{"globex's admin console session", consoleSignIn(t, g, otherKey)},
	}
	// The lookups of acme's ids first, by both; then the requests that
	// make globex's own records under those ids.
	for _, creates := range []bool{false, true} {
		for _, who := range principals {
			for _, rt := range routes {
				req := requests[rt.Method+" "+rt.Path]
				if req.creates != creates {
					continue
				}
				if next, ok := req.body.(func() any); ok {
					req.body = next()
				}
				code, body := status(t, g, rt.Method, req.path, req.body, who.headers...)
				if code != req.status {
					t.Errorf("%s %s with %s: %d %s, want %d", rt.Method, req.path, who.name, code, body, req.status)
				}
				if strings.Contains(body, "acme") || strings.Contains(body, secret) {
					t.Errorf("%s %s with %s answers acme's records: %s", rt.Method, req.path, who.name, body)
				}
			}
		}
	}
	if after := acmeState(); after != before {
		t.Errorf("acme's records changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestConsoleRoutesNeedCSRF walks every route whose method changes
// something (not GET, HEAD or OPTIONS) with a valid console session
// cookie and no CSRF token: each is a 403 naming the CSRF header, the
// console's sign-out included; the session still works afterwards. The
// sign-in, which has no session yet to hold a token, is the exception: it
// takes only a JSON body (a cross-site form cannot send one without a
// CORS preflight) and refuses a cross-site request.
func TestConsoleRoutesNeedCSRF(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	cookie := consoleSignIn(t, g, otherKey)[:2]
	param := regexp.MustCompile(`[:*][a-z]+`)
	safe := []string{http.MethodGet, http.MethodHead, http.MethodOptions}
	walked, consoleMethods := 0, map[string]bool{}
	for _, rt := range g.srv.handler.(*gin.Engine).Routes() {
		if slices.Contains(safe, rt.Method) {
			continue
		}
		path := param.ReplaceAllString(strings.ReplaceAll(rt.Path, ":agent", "demo"), "x")
		if strings.HasPrefix(rt.Path, console.Path) {
			// The console routes every method of its paths itself: the
			// one that changes something is the sign-out.
			if consoleMethods[rt.Method] {
				continue
			}
			consoleMethods[rt.Method] = true
			switch rt.Method {
			case http.MethodPost:
				continue // the sign-in, below
			case http.MethodDelete:
				path = console.Path + "/api/session"
			default:
				if code, body := status(t, g, rt.Method, console.Path+"/api/session", "{}", cookie...); code != http.StatusMethodNotAllowed {
					t.Errorf("%s %s/api/session: %d %s, want 405", rt.Method, console.Path, code, body)
				}
				continue
			}
		}
		walked++
		if code, body := status(t, g, rt.Method, path, "{}", cookie...); code != http.StatusForbidden || !strings.Contains(body, console.CSRFHeader) {
			t.Errorf("%s %s without the CSRF token: %d %s, want 403 naming %s", rt.Method, path, code, body, console.CSRFHeader)
		}
	}
	if walked < 15 || !consoleMethods[http.MethodDelete] { // the API's 14 such routes and the sign-out
		t.Fatalf("walked only %d requests (console methods %v)", walked, consoleMethods)
	}
	if code, body := status(t, g, "GET", "/console/api/session", nil, cookie...); code != http.StatusOK {
		t.Fatalf("the session after the refused requests: %d %s", code, body)
	}

	// The sign-in: JSON only, never cross-site, then a new session.
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"a form post", "key=" + otherKey, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"a text post", otherKey, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"another site", `{"key":"` + otherKey + `"}`, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "cross-site"},
		{"the console's page", `{"key":"` + otherKey + `"}`, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin"}, http.StatusOK, `"csrf"`},
	} {
		t.Run("sign-in from "+tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", g.http.URL+console.Path+"/api/session", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			req.Header.Set(cookie[0], cookie[1])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(data), tc.want) {
				t.Errorf("%d %s, want %d naming %s", resp.StatusCode, data, tc.status, tc.want)
			}
			if set := resp.Cookies(); (len(set) == 1) != (tc.status == http.StatusOK) {
				t.Errorf("cookies set: %v", set)
			}
		})
	}
}
