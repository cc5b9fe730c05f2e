package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
)

// writeRules writes dir/rules with one Rego rule (deletes are blocked)
// and returns its path.
func writeRules(t *testing.T, dir string) string {
	t.Helper()
	rules := filepath.Join(dir, "rules")
	if err := os.Mkdir(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	rego := "package turngate.tool_call\n\nblock contains \"no deletes\" if input.tool.name == \"delete\"\n"
	if err := os.WriteFile(filepath.Join(rules, "tools.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	return rules
}

// writeServeConfig writes a config with its own store and rules directory.
func writeServeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	rules := writeRules(t, dir)
	cfg := `providers: [{name: scripted, type: scripted}]
models: {demo: {provider: scripted, model: demo}}
tools:
  - {name: weather, builtin: weather}
agents:
  - {name: demo, model: demo, tools: [weather]}
store: {path: ` + filepath.Join(dir, "db", "t.db") + `}
rules: {dir: ` + rules + `, watch: false}
audit: {sink: none}
` + extra
	path := filepath.Join(dir, "turngate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// running is a serve started by startServe.
type running struct {
	addr           string
	hup            chan os.Signal
	stdout, stderr *syncWriter
	stop           func() error
}

// startServe runs serve on a free loopback port with the config at path
// until the test stops it (or ends).
func startServe(t *testing.T, path string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{hup: make(chan os.Signal, 1), stdout: &syncWriter{w: &bytes.Buffer{}}, stderr: &syncWriter{w: &bytes.Buffer{}}}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveParams{ConfigPath: path, Listen: "127.0.0.1:0", Stdout: r.stdout, Stderr: r.stderr,
			Ready: func(a string) { ready <- a }, Hangup: r.hup})
	}()
	var once sync.Once
	var stopErr error
	r.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() { _ = r.stop() })
	select {
	case r.addr = <-ready:
	case err := <-done:
		done <- err // for the cleanup's stop, which would otherwise wait forever
		t.Fatalf("serve ended early: %v\n%s", err, r.stderr)
	}
	return r
}

// chatWeather asks the demo agent of the gateway at addr for the weather
// in Paris (one tool call) in session s1 and returns the response's status
// and body.
func chatWeather(t *testing.T, addr string) (int, string) {
	t.Helper()
	body := `{"id":"s1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"weather in Paris"}]}]}`
	resp, err := http.Post("http://"+addr+"/v1/agents/demo/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestServeRunsAndShutsDown(t *testing.T) {
	r := startServe(t, writeServeConfig(t, ""))
	addr := r.addr
	status, data := chatWeather(t, addr)
	if status != http.StatusOK || !strings.Contains(data, `"tool-output-available"`) || !strings.HasSuffix(data, "data: [DONE]\n\n") {
		t.Fatalf("chat: %d %s", status, data)
	}
	r.hup <- syscall.SIGHUP
	metricsHave(t, addr, `turngate_rule_reloads_total{result="unchanged"} 1`)
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if !strings.Contains(r.stderr.String(), "NO API KEYS CONFIGURED") {
		t.Error("no loud warning about running without API keys")
	}
}

// TestServeReloadMetrics checks that SIGHUP reloads count by result and
// rejections by reason: a broken rule file is a compile failure, a failing
// test a test failure (the last good revision keeps serving), a fixed set
// a success.
func TestServeReloadMetrics(t *testing.T) {
	path := writeServeConfig(t, "")
	dir := filepath.Join(filepath.Dir(path), "rules")
	rules := filepath.Join(dir, "tools.rego")
	r := startServe(t, path)
	if err := os.WriteFile(rules, []byte("package turngate.tool_call\n\nblock contains if {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	metricsHave(t, r.addr, `turngate_rule_reloads_total{result="failure"} 1`)
	metricsHave(t, r.addr, `turngate_rule_reload_rejections_total{reason="compile"} 1`)
	rego := "package turngate.tool_call\n\nblock contains \"no weather\" if input.tool.name == \"weather\"\n"
	if err := os.WriteFile(rules, []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	failing := "package turngate.tool_call_test\n\ntest_weather_allowed if count(data.turngate.tool_call.block) == 0 with input as {\"tool\": {\"name\": \"weather\"}}\n"
	if err := os.WriteFile(filepath.Join(dir, "tools_test.rego"), []byte(failing), 0o644); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	metricsHave(t, r.addr, `turngate_rule_reload_rejections_total{reason="test"} 1`)
	if err := os.Remove(filepath.Join(dir, "tools_test.rego")); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	metricsHave(t, r.addr, `turngate_rule_reloads_total{result="success"} 1`)
}

// TestServeRefusesFailingTests checks startup under rules.requireTests: a
// failing test, or no tests when they are required, stops the gateway
// with the reason; with requireTests: false the tests are not run.
func TestServeRefusesFailingTests(t *testing.T) {
	failing := "package turngate.tool_call_test\n\ntest_delete_allowed if count(data.turngate.tool_call.block) == 0 with input as {\"tool\": {\"name\": \"delete\"}}\n"
	tests := []struct {
		name    string
		require string
		test    string // tools_test.rego, "" for none
		want    string // in serve's error; "" when it starts
	}{
		{"failing test", "", failing, `tools_test.rego:3:1: test_failed: rule "data.turngate.tool_call_test.test_delete_allowed": test failed`},
		{"tests required but none", "true", "", "tests_missing: rules.requireTests is true but the directory has no tests"},
		{"tests off", "false", failing, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeServeConfig(t, "")
			if tt.require != "" {
				rewriteRules(t, path, tt.require)
			}
			if tt.test != "" {
				if err := os.WriteFile(filepath.Join(filepath.Dir(path), "rules", "tools_test.rego"), []byte(tt.test), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.want == "" {
				startServe(t, path)
				return
			}
			err := serve(context.Background(), serveParams{ConfigPath: path, Listen: "127.0.0.1:0", Stdout: io.Discard, Stderr: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve: %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

// rewriteRules sets rules.requireTests in the config at path.
func rewriteRules(t *testing.T, path, require string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(data), ", watch: false}", ", watch: false, requireTests: "+require+"}", 1)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServeToolLimits checks that the config's tool limits reach the
// engine: limits.maxToolOutputBytes truncates the weather tool's output.
func TestServeToolLimits(t *testing.T) {
	r := startServe(t, writeServeConfig(t, "limits: {maxToolOutputBytes: 10}\n"))
	status, data := chatWeather(t, r.addr)
	if status != http.StatusOK || !strings.Contains(data, `"tool-output-available"`) || !strings.Contains(data, "…[truncated ") {
		t.Fatalf("chat: %d %s, want a truncated tool output", status, data)
	}
}

func TestEngineOptions(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("limits: {maxConcurrentTools: 3, toolTimeout: 7s, maxToolOutputBytes: 99}\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := engineOptions(cfg, nil, nil)
	if got.MaxConcurrentTools != 3 || got.ToolTimeout != 7*time.Second || got.MaxOutputBytes != 99 {
		t.Errorf("engine options %+v, want 3, 7s, 99", got)
	}
}

// TestServeReadHeaderTimeout checks that a client that never finishes its
// request headers is disconnected after limits.readHeaderTimeout.
func TestServeReadHeaderTimeout(t *testing.T) {
	r := startServe(t, writeServeConfig(t, "limits: {readHeaderTimeout: 50ms}\n"))
	conn, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/agents/demo/chat HTTP/1.1\r\nHost: x\r\nContent-"); err != nil {
		t.Fatal(err)
	}
	// A generous bound on a liveness check, not a latency assertion: without
	// the timeout the read would block until this deadline.
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a connection with unfinished headers open")
	}
	// net/http answers the timed-out request with a plain 400 and closes.
	if len(data) > 0 && !strings.HasPrefix(string(data), "HTTP/1.1 400 ") {
		t.Errorf("the server answered %q", data)
	}
}

// TestServeNeverLogsSecrets runs a turn against an upstream with a provider
// key, with gateway API keys from the environment, a failed and a good
// authentication, an upstream failure and an admin reload, then checks
// that neither the audit log (stdout) nor the logs (stderr) contain a key.
func TestServeNeverLogsSecrets(t *testing.T) {
	const providerKey, adminKey, userKey = "sk-provider-5ecret", "gw-admin-0f6b1e9d4c2a7f3e8b5d", "gw-user-3a8c5e1f7b2d9e4c6a0f"
	t.Setenv("TG_TEST_PROVIDER_KEY", providerKey)
	t.Setenv("TG_TEST_ADMIN_KEY", adminKey)
	t.Setenv("TG_TEST_USER_KEY", userKey)
	var failNext atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if failNext.Swap(false) {
			http.Error(w, `{"error":{"message":"invalid api key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	path := writeServeConfig(t, `
auth:
  apiKeys:
    - {key: "${TG_TEST_ADMIN_KEY}", tenant: t, roles: [admin, global-admin]}
    - {key: "${TG_TEST_USER_KEY}", tenant: t}
`)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "providers: [{name: scripted, type: scripted}]",
		"providers: [{name: scripted, type: scripted}, {name: up, type: openai, baseURL: \""+up.URL+"/v1\", apiKey: \"${TG_TEST_PROVIDER_KEY}\"}]", 1)
	cfg = strings.Replace(cfg, "models: {demo: {provider: scripted, model: demo}}", "models: {demo: {provider: scripted, model: demo}, up: {provider: up, model: m}}", 1)
	cfg = strings.Replace(cfg, "agents:\n", "agents:\n  - {name: remote, model: up, maxRetries: 0}\n", 1)
	cfg = strings.Replace(cfg, "audit: {sink: none}", "audit: {sink: stdout}", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, path)
	call := func(key, method, path, body string, want int) {
		t.Helper()
		if got := statusOf(t, method, "http://"+r.addr+path, key, body); got != want {
			t.Errorf("%s %s: status %d, want %d", method, path, got, want)
		}
	}
	call("wrong-"+userKey, "GET", "/v1/agents/demo/sessions/s/messages", "", http.StatusUnauthorized)
	call(userKey, "POST", "/v1/agents/remote/sessions/s1/messages", `{"text":"hello"}`, http.StatusOK)
	call(userKey, "POST", "/v1/agents/demo/chat", `{"id":"s2","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"weather in Oslo"}]}]}`, http.StatusOK)
	failNext.Store(true)
	call(userKey, "POST", "/v1/agents/remote/sessions/s1/messages", `{"text":"again"}`, http.StatusOK)
	call(userKey, "POST", "/v1/admin/rules/reload", "", http.StatusForbidden)
	call(adminKey, "POST", "/v1/admin/rules/reload", "", http.StatusOK)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	audit, logs := r.stdout.String(), r.stderr.String()
	if !strings.Contains(audit, `"kind":"turn"`) || !strings.Contains(audit, `"status":"error"`) {
		t.Fatalf("the audit log lacks the turns:\n%s", audit)
	}
	// Logs go to stderr only: stdout is one unbroken audit chain.
	sink := filepath.Join(t.TempDir(), "stdout.jsonl")
	if err := os.WriteFile(sink, []byte(audit), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"audit", "verify", sink}, &out, &errOut); code != 0 {
		t.Errorf("turngate audit verify on stdout: exit %d: %s", code, errOut.String())
	}
	for _, secret := range []string{providerKey, adminKey, userKey} {
		if strings.Contains(audit, secret) {
			t.Errorf("the audit log contains the secret %q", secret)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain the secret %q", secret)
		}
	}
}

// metricsHave polls /metrics until it contains want.
func metricsHave(t *testing.T, addr, want string) {
	t.Helper()
	for range 400 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(data), want) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("metrics never showed %s", want)
}

func TestServeRefusesPublicListenWithoutKeys(t *testing.T) {
	err := serve(context.Background(), serveParams{ConfigPath: writeServeConfig(t, ""), Listen: "0.0.0.0:0",
		Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "without API keys") {
		t.Errorf("serve on 0.0.0.0 without keys: %v", err)
	}
}

func TestServeBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("listen: x\nlsten: y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := runServe(context.Background(), []string{"--config", path}, io.Discard, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "line 2") {
		t.Errorf("stderr %q does not point at line 2", stderr.String())
	}
	if code := runServe(context.Background(), []string{"extra"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("exit code %d for a stray argument, want 2", code)
	}
}

// TestServeRefusesMissingExtensionProgram: an exec extension whose
// program is missing fails serve at startup, positioned at the program and
// before the store creates its file, instead of being restarted forever.
func TestServeRefusesMissingExtensionProgram(t *testing.T) {
	path := writeServeConfig(t, "extensions:\n  - name: local\n    transport: exec\n    command: [./bin/no-such-extension, -v]\n    hooks: [afterToolCall]\n")
	var stderr bytes.Buffer
	if code := runServe(context.Background(), []string{"--config", path, "--listen", "127.0.0.1:0"}, io.Discard, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, &stderr)
	}
	want := "turngate.yaml: line 13 col 15: extensions[0] (local): command: " + filepath.Join(filepath.Dir(path), "bin", "no-such-extension") + " does not exist"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not contain %q", &stderr, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the store's directory exists after a refused start: %v", err)
	}
}

// syncWriter serialises writes from the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String returns what was written (the writer must be a *bytes.Buffer).
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(*bytes.Buffer).String()
}

// TestServeMetricsListener: with metrics.listen and metrics.key, /metrics
// leaves the public listener and answers on its own address only to the
// scraper's key.
func TestServeMetricsListener(t *testing.T) {
	const metricsKey = "metrics-2b7e9c4a1f6d3e8b5c0a9f7e"
	t.Setenv("TG_TEST_METRICS_KEY", metricsKey)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := free.Addr().String()
	free.Close()
	r := startServe(t, writeServeConfig(t, "metrics: {listen: \""+metricsAddr+"\", key: \"${TG_TEST_METRICS_KEY}\"}\n"))
	for _, tc := range []struct {
		name, addr, key string
		want            int
	}{
		{"the public listener", r.addr, metricsKey, http.StatusNotFound},
		{"no key", metricsAddr, "", http.StatusUnauthorized},
		{"a wrong key", metricsAddr, "wrong-" + metricsKey, http.StatusUnauthorized},
		{"the scraper's key", metricsAddr, metricsKey, http.StatusOK},
	} {
		if got := statusOf(t, "GET", "http://"+tc.addr+"/metrics", tc.key, ""); got != tc.want {
			t.Errorf("%s: /metrics answered %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A keyless metrics listener on loopback answers programs of this machine,
// not a web page whose name was rebound to 127.0.0.1 (DNS rebinding).
func TestServeKeylessMetricsListenerRefusesReboundNames(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := free.Addr().String()
	free.Close()
	_, port, _ := net.SplitHostPort(metricsAddr)
	startServe(t, writeServeConfig(t, "metrics: {listen: \""+metricsAddr+"\"}\n"))
	for _, tc := range []struct {
		host string
		want int
	}{
		{metricsAddr, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"attacker.example:" + port, http.StatusForbidden},
		{"127.0.0.1", http.StatusForbidden}, // port 80, not the listener's
	} {
		req, _ := http.NewRequest("GET", "http://"+metricsAddr+"/metrics", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s: /metrics answered %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
}

// statusOf sends a request (a JSON body, the bearer key when not empty)
// and returns its status.
func statusOf(t *testing.T, method, url, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
