// Package tests holds turngate's end-to-end tests: they build the real
// binary once, start it as a separate process on a free loopback port and
// talk to it over HTTP, as a user or a third-party client would.
package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Generous deadlines: the tests poll until something happens and only fail
// when it never does, so a slow CI machine makes them slower, not flaky.
const (
	// startTimeout bounds a gateway's start until /healthz answers.
	startTimeout = 90 * time.Second
	// stopTimeout is how long SIGTERM may take before SIGKILL.
	stopTimeout = 30 * time.Second
	// pollTimeout bounds waiting for an asynchronous effect.
	pollTimeout = 60 * time.Second
	// pollInterval is the pause between two polls.
	pollInterval = 25 * time.Millisecond
	// requestTimeout bounds one HTTP exchange, streams included.
	requestTimeout = 2 * time.Minute
	// startAttempts is how often a start is retried when the free port it
	// picked was taken in between.
	startAttempts = 3
)

var (
	// repoRoot is the module's root directory.
	repoRoot string
	// binary is the turngate binary TestMain built.
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain builds the binary into a temporary directory, runs the tests and
// removes the directory.
func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: finding the repository root:", err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "turngate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: making the build directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "turngate")
	build := exec.Command("go", "build", "-o", binary, "./cmd/turngate")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: building turngate: %v\n%s", err, out)
		return 1
	}
	defer closeBrowser()
	return m.Run()
}

// lockedBuffer is a bytes.Buffer safe for a process writing while a test
// reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gatewayOptions says how to start a gateway.
type gatewayOptions struct {
	// Config is the --config file, relative to Dir; empty runs the embedded
	// default configuration.
	Config string
	// Dir is the working directory; empty makes a fresh temporary one.
	Dir string
	// Env is added to the test process's environment.
	Env []string
}

// gateway is one running turngate process.
type gateway struct {
	t    *testing.T
	opts gatewayOptions
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Stdout collects the process's standard output (the stdout audit sink).
	Stdout *lockedBuffer
	// Stderr collects its logs.
	Stderr *lockedBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	// runs counts the processes started, for the log headers.
	runs int
	// key is the bearer API key sent with requests (none if empty).
	key string
}

// startGateway starts turngate serve with opts and waits until /healthz
// answers. The process is stopped (SIGTERM, then SIGKILL) when the test
// ends; its stderr goes to the test log if the test failed or runs with -v.
func startGateway(t *testing.T, opts gatewayOptions) *gateway {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	g := &gateway{t: t, opts: opts}
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() || testing.Verbose() {
			t.Logf("gateway stderr:\n%s", g.Stderr)
		}
	})
	g.start()
	return g
}

// start starts the process on a fresh free port, retrying when the port
// was taken in between.
func (g *gateway) start() {
	g.t.Helper()
	if g.Stdout == nil {
		g.Stdout, g.Stderr = &lockedBuffer{}, &lockedBuffer{}
	}
	var lastErr error
	for range startAttempts {
		addr, err := freeAddr()
		if err != nil {
			g.t.Fatalf("picking a free port: %v", err)
		}
		err = g.startOn(addr)
		if err == nil {
			return
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	g.t.Fatalf("starting turngate: %v", lastErr)
}

// startOn starts the process listening on addr and waits for /healthz.
func (g *gateway) startOn(addr string) error {
	args := []string{"serve", "--listen", addr}
	if g.opts.Config != "" {
		args = append(args, "--config", g.opts.Config)
	}
	g.runs++
	fmt.Fprintf(g.Stderr, "=== process %d: turngate %s (in %s)\n", g.runs, strings.Join(args, " "), g.opts.Dir)
	cmd := exec.Command(binary, args...)
	cmd.Dir = g.opts.Dir
	cmd.Env = append(os.Environ(), g.opts.Env...)
	cmd.Stdout, cmd.Stderr = g.Stdout, g.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	g.cmd, g.exited, g.URL = cmd, make(chan struct{}), "http://"+addr
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(g.exited)

	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return fmt.Errorf("turngate exited before serving (%v): %s", cmd.ProcessState, lastLine(g.Stderr.String()))
		default:
		}
		resp, err := http.Get(g.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(pollInterval)
	}
	g.kill()
	return fmt.Errorf("/healthz did not answer 200 within %v", startTimeout)
}

// Stop ends the process gracefully: SIGTERM, then SIGKILL after
// stopTimeout. It does nothing if the process already ended.
func (g *gateway) Stop() {
	if g.cmd == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(stopTimeout):
		g.t.Errorf("turngate did not stop within %v of SIGTERM; killing it", stopTimeout)
		g.kill()
	}
	g.cmd = nil
}

// Terminate sends SIGTERM and returns without waiting; Wait waits.
func (g *gateway) Terminate() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
}

// Wait waits until the process ends (at most stopTimeout) and returns its
// exit code.
func (g *gateway) Wait() int {
	g.t.Helper()
	select {
	case <-g.exited:
	case <-time.After(stopTimeout):
		g.t.Fatalf("turngate did not exit within %v", stopTimeout)
	}
	code := g.cmd.ProcessState.ExitCode()
	g.cmd = nil
	return code
}

// Kill ends the process with SIGKILL, as a crash would.
func (g *gateway) Kill() {
	g.kill()
	g.cmd = nil
}

func (g *gateway) kill() {
	if g.cmd == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// Restart starts a new process with the same options (same working
// directory, so the same database and rules) on a new port.
func (g *gateway) Restart() {
	g.t.Helper()
	g.Stop()
	g.start()
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// client is the tests' HTTP client; every exchange has a deadline.
var client = &http.Client{Timeout: requestTimeout}

// do sends a request with an optional JSON body and returns the response;
// the body is closed when the test ends.
func (g *gateway) do(method, path string, body any) *http.Response {
	g.t.Helper()
	if body == nil {
		return g.raw(method, path, "", nil)
	}
	data, err := json.Marshal(body)
	if err != nil {
		g.t.Fatalf("encoding request body: %v", err)
	}
	return g.raw(method, path, "application/json", data)
}

// raw sends body as is with the given content type (none if empty), and
// the gateway's API key if it has one.
func (g *gateway) raw(method, path, contentType string, body []byte) *http.Response {
	g.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if g.key != "" {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	g.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// as returns a view of g that sends key as its bearer API key. The view
// shares g's process; only g itself stops it.
func (g *gateway) as(key string) *gateway {
	return &gateway{t: g.t, URL: g.URL, key: key}
}

// json sends a request and decodes a JSON response into out (if not nil),
// failing unless the status is want.
func (g *gateway) json(method, path string, body any, want int, out any) {
	g.t.Helper()
	resp := g.do(method, path, body)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("%s %s: reading response: %v", method, path, err)
	}
	if resp.StatusCode != want {
		g.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			g.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// chatBody is what DefaultChatTransport sends (protocols.md A.2).
type chatBody map[string]any

// userChat is a new-user-message chat body for session id, with extra keys
// merged at the top level as the transport's body option does.
func userChat(id, msgID, text string, extra map[string]any) chatBody {
	b := chatBody{
		"id":      id,
		"trigger": "submit-message",
		"messages": []map[string]any{{
			"id": msgID, "role": "user", "parts": []map[string]any{{"type": "text", "text": text}},
		}},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// openChat POSTs a chat request and returns a reader on its checked UI
// message stream, after checking status and headers.
func (g *gateway) openChat(agent string, body chatBody, known ...string) *uiStreamReader {
	g.t.Helper()
	resp := g.do(http.MethodPost, "/v1/agents/"+agent+"/chat", body)
	checkStreamResponse(g.t, resp)
	return newUIStreamReader(resp.Body, known...)
}

// chat POSTs a chat request and returns its complete, checked stream.
func (g *gateway) chat(agent string, body chatBody, known ...string) *uiStream {
	g.t.Helper()
	s, err := g.openChat(agent, body, known...).finish()
	if err != nil {
		g.t.Fatalf("UI message stream violates the protocol: %v\nstream:\n%s", err, s)
	}
	return s
}

// checkStreamResponse checks a UI message stream response's status and the
// headers of protocols.md A.3.
func checkStreamResponse(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: status %d, want 200; body: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, data)
	}
	for name, want := range map[string]string{
		"Content-Type":                  "text/event-stream",
		"X-Vercel-Ai-Ui-Message-Stream": "v1",
		"Cache-Control":                 "no-cache",
	} {
		if got := resp.Header.Get(name); !strings.HasPrefix(got, want) {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}

// poll calls check until it returns nil or pollTimeout passes, then fails
// with check's last error.
func poll(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v: %v", what, pollTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// getJSON GETs path into out (when the status is 200) and returns the
// status; it does not fail the test, so poll loops can use it.
func (g *gateway) getJSON(path string, out any) (int, error) {
	code, data, err := g.try(http.MethodGet, path, nil)
	if err != nil {
		return code, err
	}
	if out != nil && code == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return code, fmt.Errorf("decoding %s: %w", data, err)
		}
	}
	return code, nil
}

// try sends a request with an optional JSON body and returns the status and
// the whole response body. It does not fail the test, so goroutines and
// poll loops can use it.
func (g *gateway) try(method, path string, body any) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.key != "" {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// copyDir copies the tree at src into dst (created if needed).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// fixture copies testdata/name into a fresh temporary directory and
// returns the directory, ready to be a gateway's working directory.
func fixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", name), dir)
	return dir
}

// auditRecords returns the JSON lines the stdout audit sink has written so
// far; other lines are skipped.
func (g *gateway) auditRecords() []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(g.Stdout.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// waitAudit polls the audit log until a record matches and returns it.
func (g *gateway) waitAudit(what string, match func(rec map[string]any) bool) map[string]any {
	g.t.Helper()
	var found map[string]any
	poll(g.t, "an audit record for "+what, func() error {
		for _, rec := range g.auditRecords() {
			if match(rec) {
				found = rec
				return nil
			}
		}
		return fmt.Errorf("none among %d records", len(g.auditRecords()))
	})
	return found
}

// toolDecision matches a beforeToolCall audit record of session and tool.
func toolDecision(session, tool string) func(map[string]any) bool {
	return func(rec map[string]any) bool {
		return rec["hook"] == "beforeToolCall" && rec["sessionId"] == session && rec["toolName"] == tool
	}
}

// metricLine returns the first line of GET /metrics that starts with name
// and contains every label pair, or "".
func (g *gateway) metricLine(name string, labels ...string) string {
	g.t.Helper()
	resp := g.do(http.MethodGet, "/metrics", nil)
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET /metrics: status %d: %v", resp.StatusCode, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			return line
		}
	}
	return ""
}
