package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeServeConfig writes a config with its own store and rules directory.
func writeServeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	if err := os.Mkdir(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	rego := "package turngate.tool_call\n\nblock contains \"no deletes\" if input.tool.name == \"delete\"\n"
	if err := os.WriteFile(filepath.Join(rules, "tools.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
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

func TestServeRunsAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	hup := make(chan os.Signal, 1)
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveParams{ConfigPath: writeServeConfig(t, ""), Listen: "127.0.0.1:0",
			Stdout: io.Discard, Stderr: &syncWriter{w: &stderr}, Ready: func(a string) { ready <- a }, Hangup: hup})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	}
	body := `{"id":"s1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"weather in Paris"}]}]}`
	resp, err := http.Post("http://"+addr+"/v1/agents/demo/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"tool-output-available"`) || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
		t.Fatalf("chat: %d %s", resp.StatusCode, data)
	}
	hup <- syscall.SIGHUP
	metricsHave(t, addr, `turngate_rule_reloads_total{result="unchanged"} 1`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if !strings.Contains(stderr.String(), "NO API KEYS CONFIGURED") {
		t.Error("no loud warning about running without API keys")
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
