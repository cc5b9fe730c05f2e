package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/internal/fakeclock"
)

// keys are the test console's API keys.
var keys = map[string]engine.Principal{
	"admin-key":    {Tenant: "acme", Subject: "ops", Roles: []string{"admin"}},
	"approver-key": {Tenant: "acme", Subject: "fin", Roles: []string{"finance"}},
	"user-key":     {Tenant: "acme", Subject: "bob", Roles: []string{}},
}

// lookupKeys authenticates the keys of keys; a recheck finds the key
// still there.
func lookupKeys(_ context.Context, k string) (Credential, error) {
	p, ok := keys[k]
	if !ok {
		return Credential{}, errors.New("no such key")
	}
	return Credential{Principal: p, Recheck: func(ctx context.Context) (Credential, error) { return lookupKeys(ctx, k) }}, nil
}

func newTestConsole(clock *fakeclock.Clock, max int) *Console {
	return New(Options{
		Lookup:      lookupKeys,
		Now:         clock.Now,
		MaxSessions: max,
	})
}

// request builds a request to the console; headers are name, value pairs.
func request(method, path, body string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func serve(c *Console, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// signIn signs in with key and returns the cookie and the CSRF token.
func signIn(t *testing.T, c *Console, key string) (*http.Cookie, string) {
	t.Helper()
	w := serve(c, request("POST", "/console/api/session", `{"key":"`+key+`"}`))
	if w.Code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	var s sessionResponse
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || s.CSRF == "" {
		t.Fatalf("sign-in gave cookies %v, csrf %q", cookies, s.CSRF)
	}
	return cookies[0], s.CSRF
}

func TestSignInCookie(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	c := newTestConsole(clock, 0)
	for _, tc := range []struct {
		name       string
		tls        bool
		header     []string
		wantSecure bool
	}{
		{name: "plain http", wantSecure: false},
		{name: "tls", tls: true, wantSecure: true},
		{name: "behind a TLS proxy", header: []string{"X-Forwarded-Proto", "https"}, wantSecure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request("POST", "/console/api/session", `{"key":"admin-key"}`, tc.header...)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := serve(c, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if strings.Contains(w.Body.String(), "admin-key") {
				t.Errorf("the answer repeats the key: %s", w.Body)
			}
			set := w.Header().Get("Set-Cookie")
			for _, want := range []string{CookieName + "=", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=28800", "Expires="} {
				if !strings.Contains(set, want) {
					t.Errorf("Set-Cookie %q lacks %q", set, want)
				}
			}
			if got := strings.Contains(set, "Secure"); got != tc.wantSecure {
				t.Errorf("Set-Cookie %q: Secure %v, want %v", set, got, tc.wantSecure)
			}
		})
	}
}

func TestSignInRefusals(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	for _, tc := range []struct {
		name    string
		r       *http.Request
		status  int
		message string
	}{
		{"wrong key", request("POST", "/console/api/session", `{"key":"nope"}`), 401, "invalid API key"},
		{"key without a role", request("POST", "/console/api/session", `{"key":"user-key"}`), 403, "has no role"},
		{"no key", request("POST", "/console/api/session", `{}`), 400, "key is required"},
		{"unknown field", request("POST", "/console/api/session", `{"key":"admin-key","tenant":"x"}`), 400, "unknown field"},
		{"form post", request("POST", "/console/api/session", `key=admin-key`, "Content-Type", "application/x-www-form-urlencoded"), 415, "Content-Type"},
		{"another site", request("POST", "/console/api/session", `{"key":"admin-key"}`, "Sec-Fetch-Site", "cross-site"), 403, "cross-site"},
		{"too large", request("POST", "/console/api/session", `{"key":"`+strings.Repeat("k", 5000)+`"}`), 413, "at most"},
		{"put", request("PUT", "/console/api/session", `{"key":"admin-key"}`), 405, "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(c, tc.r)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.message) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.message)
			}
			if w.Header().Get("Set-Cookie") != "" {
				t.Errorf("a refused sign-in set a cookie: %s", w.Header().Get("Set-Cookie"))
			}
		})
	}
}

// TestSignInGuessingBounded: after SignInFailuresPerMinute wrong keys from
// one address, even the right key is refused until the minute ends; other
// addresses can sign in.
func TestSignInGuessingBounded(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	c := newTestConsole(clock, 0)
	for i := range SignInFailuresPerMinute {
		if w := serve(c, request("POST", "/console/api/session", `{"key":"guess"}`)); w.Code != 401 {
			t.Fatalf("guess %d: %d", i, w.Code)
		}
	}
	w := serve(c, request("POST", "/console/api/session", `{"key":"admin-key"}`))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("after %d guesses: %d Retry-After %q, want 429 60", SignInFailuresPerMinute, w.Code, w.Header().Get("Retry-After"))
	}
	other := request("POST", "/console/api/session", `{"key":"admin-key"}`)
	other.RemoteAddr = "198.51.100.7:1234"
	if w := serve(c, other); w.Code != 200 {
		t.Errorf("another address: %d", w.Code)
	}
	clock.Advance(time.Minute)
	if w := serve(c, request("POST", "/console/api/session", `{"key":"admin-key"}`)); w.Code != 200 {
		t.Errorf("next minute: %d %s", w.Code, w.Body)
	}
}

func TestPrincipalCSRF(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	ck, csrf := signIn(t, c, "admin-key")
	for _, tc := range []struct {
		name    string
		method  string
		headers []string
		want    error
	}{
		{"GET needs no token", "GET", nil, nil},
		{"POST without a token", "POST", nil, ErrCSRF},
		{"POST with a wrong token", "POST", []string{CSRFHeader, csrf + "x"}, ErrCSRF},
		{"DELETE with an empty token", "DELETE", []string{CSRFHeader, ""}, ErrCSRF},
		{"POST with the token", "POST", []string{CSRFHeader, csrf}, nil},
		{"POST with the token from another site", "POST", []string{CSRFHeader, csrf, "Sec-Fetch-Site", "cross-site"}, ErrCSRF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(tc.method, "/v1/admin/rules/reload", "", tc.headers...)
			r.AddCookie(ck)
			p, err := c.Principal(r)
			if err != tc.want {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && p.Subject != "ops" {
				t.Errorf("principal %+v", p)
			}
		})
	}
	forged := request("GET", "/v1/admin/rules", "")
	forged.AddCookie(&http.Cookie{Name: CookieName, Value: "forged"})
	if _, err := c.Principal(forged); err != ErrNoSession {
		t.Errorf("forged cookie: %v", err)
	}
}

func TestSessionEnds(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	c := newTestConsole(clock, 0)
	ck, csrf := signIn(t, c, "admin-key")
	get := func() int {
		r := request("GET", "/console/api/session", "")
		r.AddCookie(ck)
		return serve(c, r).Code
	}
	clock.Advance(DefaultSessionTTL - time.Second)
	if got := get(); got != 200 {
		t.Fatalf("before expiry: %d", got)
	}
	clock.Advance(time.Second)
	if got := get(); got != 401 {
		t.Fatalf("at expiry: %d", got)
	}

	ck, csrf = signIn(t, c, "admin-key")
	out := request("DELETE", "/console/api/session", "")
	out.AddCookie(ck)
	if w := serve(c, out); w.Code != 403 {
		t.Fatalf("sign-out without CSRF: %d", w.Code)
	}
	out.Header.Set(CSRFHeader, csrf)
	w := serve(c, out)
	if w.Code != 204 || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign-out: %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	if got := get(); got != 401 {
		t.Errorf("after sign-out the cookie still works: %d", got)
	}
}

func TestSessionsBounded(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	c := newTestConsole(clock, 3)
	var first []*http.Cookie
	for range 5 {
		ck, _ := signIn(t, c, "approver-key")
		first = append(first, ck)
		clock.Advance(time.Second)
	}
	if n := c.sessions.count(); n != 3 {
		t.Fatalf("%d sessions held, want the bound 3", n)
	}
	for i, ck := range first {
		r := request("GET", "/console/api/session", "")
		r.AddCookie(ck)
		want := 200
		if i < 2 {
			want = 401
		}
		if got := serve(c, r).Code; got != want {
			t.Errorf("session %d: %d, want %d (the oldest end first)", i, got, want)
		}
	}
}

// TestPagesNeedSession: the signed-in pages' modules and the session are
// refused without a session; the sign-in page and its script are served.
func TestPagesNeedSession(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	ck, _ := signIn(t, c, "approver-key")
	err := fs.WalkDir(c.static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		path := Path + "/" + name
		w := serve(c, request("GET", path, ""))
		public := strings.HasPrefix(name, "static/")
		if public != (w.Code == 200) {
			t.Errorf("GET %s without a session: %d", path, w.Code)
		}
		r := request("GET", path, "")
		r.AddCookie(ck)
		if w := serve(c, r); w.Code != 200 || w.Header().Get("Content-Type") == "" {
			t.Errorf("GET %s with a session: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/api/session", "/console/app/../static/main.js", "/console/app/nope.js", "/console/nope"} {
		w := serve(c, request("GET", p, ""))
		if w.Code == 200 {
			t.Errorf("GET %s without a session: 200", p)
		}
	}
	if w := serve(c, request("POST", "/console/", "{}")); w.Code != 405 {
		t.Errorf("POST /console/: %d", w.Code)
	}
}

func TestSecurityHeaders(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	w := serve(c, request("GET", "/console/", ""))
	h := w.Header()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
}

// TestAssetsSelfContained: no inline script or style, no event handler
// attribute, nothing from another origin, no innerHTML.
func TestAssetsSelfContained(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	bad := map[string]*regexp.Regexp{
		"inline script":    regexp.MustCompile(`<script>|<script\b[^>]*>[^<]+</script>|<script(?:\s+(?:type|async|defer)(?:="[^"]*")?)*>`),
		"inline style":     regexp.MustCompile(`<style|style="`),
		"event attribute":  regexp.MustCompile(`<[^>]+\son[a-z]+=`),
		"another origin":   regexp.MustCompile(`(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`),
		"innerHTML":        regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write`),
		"eval of a string": regexp.MustCompile(`\beval\(|new Function\(`),
	}
	for what, sample := range map[string]string{"inline script": `<script type="module">go()</script>`, "event attribute": `<a onclick="x">`, "another origin": `import "https://cdn.example.com/x.js"`} {
		if !bad[what].MatchString(sample) {
			t.Fatalf("the %s check misses %q", what, sample)
		}
	}
	err := fs.WalkDir(c.static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, _ := c.static.Open(name)
		data, _ := io.ReadAll(f)
		f.Close()
		for what, re := range bad {
			if what == "another origin" && strings.HasSuffix(name, ".svg") {
				continue
			}
			if m := re.Find(data); m != nil {
				t.Errorf("%s: %s: %q", name, what, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenMode(t *testing.T) {
	c := New(Options{Anonymous: engine.Principal{Tenant: "default", Subject: "anonymous", Roles: []string{"admin"}}})
	w := serve(c, request("GET", "/console/api/session", ""))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"open":true`) {
		t.Fatalf("open session: %d %s", w.Code, w.Body)
	}
	if w := serve(c, request("GET", "/console/app/app.js", "")); w.Code != 200 {
		t.Errorf("open mode app: %d", w.Code)
	}
	if w := serve(c, request("POST", "/console/api/session", `{"key":"x"}`)); w.Code != 409 {
		t.Errorf("open mode sign-in: %d", w.Code)
	}
}

func FuzzDecodeSignIn(f *testing.F) {
	for _, s := range []string{`{"key":"k"}`, `{}`, `{"key":1}`, `[]`, `{"key":"a"}{"key":"b"}`, `{"key":"  "}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := decodeSignIn(data)
		if err == nil && strings.TrimSpace(key) == "" {
			t.Fatalf("accepted an empty key from %q", data)
		}
		if err != nil && key != "" {
			t.Fatalf("returned key %q with error %v", key, err)
		}
	})
}

// TestScriptsParse checks every embedded module with node --check, so a
// syntax error cannot ship a console that stays at "Loading…". A machine
// with only Go skips it (the console needs no Node.js); .ci/run installs
// Node.js, so CI runs it.
func TestScriptsParse(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("skipping: node --check needs Node.js, which is not in PATH (%v); .ci/run installs it, and TestConsoleInBrowser runs the modules in Chromium", err)
	}
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	dir := t.TempDir()
	err = fs.WalkDir(c.static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".js") {
			return err
		}
		data, err := fs.ReadFile(c.static, name)
		if err != nil {
			return err
		}
		// .mjs: node parses it as a module, as the browser does.
		file := filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".mjs")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return err
		}
		if out, err := exec.Command(node, "--check", file).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", name, err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFilterValues: the Decisions page offers every value of the store's
// closed filters (hook, outcome, action), as decisions.Hooks, Outcomes
// and Actions list them, in their order: a hook added to the store shows
// in the page's filter.
func TestFilterValues(t *testing.T) {
	c := newTestConsole(fakeclock.New(time.Unix(1_800_000_000, 0)), 0)
	src, err := fs.ReadFile(c.static, "app/decisions.js")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{"hooks": decisions.Hooks, "outcomes": decisions.Outcomes, "actions": decisions.Actions} {
		m := regexp.MustCompile(`(?m)^export const ` + name + ` = (\[.*\]);$`).FindSubmatch(src)
		if m == nil {
			t.Errorf("decisions.js has no line export const %s = [...];", name)
			continue
		}
		var got []string
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(m[1]), "'", `"`)), &got); err != nil {
			t.Errorf("decisions.js's %s %s: %v", name, m[1], err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("the Decisions page offers the %s %q, the store filters by %q", name, got, want)
		}
	}
}
