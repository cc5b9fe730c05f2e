package extension

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/childenv"
)

func TestSignVerify(t *testing.T) {
	secret := []byte("0123456789abcdef")
	body := []byte(`{"version":1}`)
	now := time.Unix(1_800_000_000, 0)
	sig := Sign(secret, now, body)
	if !strings.HasPrefix(sig, "t=1800000000,v1=") {
		t.Fatalf("signature %q", sig)
	}
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", secret, sig, body, now, nil},
		{"valid within tolerance", secret, sig, body, now.Add(4 * time.Minute), nil},
		{"wrong secret", []byte("another secret!!"), sig, body, now, ErrBadSignature},
		{"altered body", secret, sig, []byte(`{"version":2}`), now, ErrBadSignature},
		{"altered timestamp", secret, strings.Replace(sig, "t=1800000000", "t=1800000001", 1), body, now, ErrBadSignature},
		{"replayed later", secret, sig, body, now.Add(10 * time.Minute), ErrStale},
		{"no header", secret, "", body, now, ErrNoSignature},
		{"no v1", secret, "t=1800000000", body, now, ErrNoSignature},
		{"garbage", secret, "v1=zz,t=x", body, now, ErrNoSignature},
		{"one of several signatures matches", secret, sig + ",v1=00", body, now, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.secret, tc.header, tc.body, tc.now, DefaultTolerance)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// rules is the rule revision's hooks in these tests: a fixed beforeTurn
// result.
type rules struct {
	engine.NopHooks
	cfg *engine.TurnConfig
}

func (r rules) BeforeTurn(context.Context, *engine.TurnContext) (*engine.TurnConfig, error) {
	return r.cfg, nil
}

func turnContext(agent string) *engine.TurnContext {
	return &engine.TurnContext{Identity: engine.Identity{RequestID: "req_1", SessionID: "s1", Agent: agent},
		System: "base", Model: "demo", Tools: []engine.ToolInfo{{Name: "search"}, {Name: "delete"}},
		Messages: []engine.ModelMessage{{Role: engine.RoleUser}}}
}

// systemAppender is an http extension that appends line to the system
// prompt it is shown, and records the snapshots it receives.
type systemAppender struct {
	mu    sync.Mutex
	seen  []BeforeTurnSnapshot
	hooks []string
}

func (a *systemAppender) server(t *testing.T, line string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			Hook     string             `json:"hook"`
			Snapshot BeforeTurnSnapshot `json:"snapshot"`
		}
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &env)
		a.mu.Lock()
		a.hooks = append(a.hooks, env.Hook)
		if env.Hook == HookBeforeTurn {
			a.seen = append(a.seen, env.Snapshot)
		}
		a.mu.Unlock()
		if env.Hook == HookBeforeTurn {
			_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"system": env.Snapshot.System + line, "activeTools": []string{"search"}}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func httpExt(name, url string, agents ...string) config.Extension {
	return config.Extension{Name: name, Transport: config.TransportHTTP, URL: url, Secret: "0123456789abcdef",
		Hooks: []string{HookBeforeTurn, HookAfterToolCall}, Timeout: 5 * time.Second, QueueSize: 8, Agents: agents}
}

// TestBeforeTurnOrder: extensions run in configuration order after the
// rules, each seeing what the earlier ones chose; an extension filtered
// to other agents is not called.
func TestBeforeTurnOrder(t *testing.T) {
	var a, b, c systemAppender
	set := New([]config.Extension{
		httpExt("a", a.server(t, " +a").URL),
		httpExt("elsewhere", c.server(t, " +c").URL, "other"),
		httpExt("b", b.server(t, " +b").URL),
	}, Options{Logger: slog.New(slog.DiscardHandler)})
	defer set.Close(context.Background())
	rulesSystem := "ruled"
	cfg, err := set.Wrap(rules{cfg: &engine.TurnConfig{System: &rulesSystem}}).BeforeTurn(context.Background(), turnContext("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.System == nil || *cfg.System != "ruled +a +b" {
		t.Errorf("system = %v, want the rules' prompt with a's then b's line", cfg.System)
	}
	if len(a.seen) != 1 || a.seen[0].System != "ruled" || strings.Join(a.seen[0].ToolNames, ",") != "search,delete" {
		t.Errorf("a saw %+v, want the rules' system and every tool", a.seen)
	}
	if len(b.seen) != 1 || b.seen[0].System != "ruled +a" || strings.Join(b.seen[0].ToolNames, ",") != "search" {
		t.Errorf("b saw %+v, want a's system and activeTools", b.seen)
	}
	if len(c.seen) != 0 {
		t.Errorf("the extension of agent other was called for demo: %+v", c.seen)
	}
}

// TestCloseDrainsTheQueue: observations queued at Close are still sent.
func TestCloseDrainsTheQueue(t *testing.T) {
	var a systemAppender
	set := New([]config.Extension{httpExt("a", a.server(t, "").URL)}, Options{Logger: slog.New(slog.DiscardHandler)})
	h := set.Wrap(engine.NopHooks{})
	for range 5 {
		h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{ToolName: "search", Success: true})
	}
	set.Close(context.Background())
	if len(a.hooks) != 5 {
		t.Errorf("%d deliveries after Close, want the 5 queued", len(a.hooks))
	}
	h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{ToolName: "search"}) // dropped, no panic
}

// TestNoExtensions: Wrap adds nothing when no extension is configured.
func TestNoExtensions(t *testing.T) {
	r := rules{}
	if h := New(nil, Options{}).Wrap(r); h != engine.Hooks(r) {
		t.Errorf("Wrap without extensions = %T, want the rules' hooks", h)
	}
}

// buildExecExt builds testdata/execext.
func buildExecExt(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "execext")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/execext").CombinedOutput()
	if err != nil {
		t.Fatalf("building the exec extension: %v\n%s", err, out)
	}
	return bin
}

// TestExecExtension: a child process answers beforeTurn over JSON lines,
// receives observations, and is restarted when it dies.
func TestExecExtension(t *testing.T) {
	bin := buildExecExt(t)
	logPath := filepath.Join(t.TempDir(), "hooks.log")
	var logs bytes.Buffer
	var logMu sync.Mutex
	set := New([]config.Extension{{Name: "child", Transport: config.TransportExec,
		Command: []string{bin, "-log", logPath, "-crash-after", "2"},
		Hooks:   []string{HookBeforeTurn, HookAfterToolCall}, Timeout: 5 * time.Second, QueueSize: 8}},
		Options{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))})
	defer set.Close(context.Background())
	h := set.Wrap(engine.NopHooks{})

	// The first answer may come before the process has started: retry.
	beforeTurn := func() string {
		cfg, err := h.BeforeTurn(context.Background(), turnContext("demo"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg == nil || cfg.System == nil {
			return ""
		}
		return *cfg.System
	}
	waitUntil(t, "an answer from the child", func() bool { return beforeTurn() == "base (exec)" })
	h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{ToolName: "search", Success: true})
	waitUntil(t, "the afterToolCall delivery", func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "afterToolCall")
	})
	// The child exits after its second envelope; it is restarted.
	waitUntil(t, "an answer from the restarted child", func() bool { return beforeTurn() == "base (exec)" })
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "extension process exited; restarting") {
		t.Errorf("the restart was not logged:\n%s", logs.String())
	}
}

// TestExecExtensionHostileLine: a stdout line over MaxResponseBytes gets
// the process killed (and restarted); the call fails, nothing panics.
func TestExecExtensionHostileLine(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "flood.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nread line\nhead -c 2000000 /dev/zero | tr '\\0' x\necho\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	set := New([]config.Extension{{Name: "flood", Transport: config.TransportExec, Command: []string{script},
		Hooks: []string{HookBeforeTurn}, Timeout: 5 * time.Second, QueueSize: 8}},
		Options{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))})
	defer set.Close(context.Background())
	h := set.Wrap(engine.NopHooks{})
	waitUntil(t, "the protocol violation", func() bool {
		if cfg, _ := h.BeforeTurn(context.Background(), turnContext("demo")); cfg != nil {
			t.Fatalf("a result from a flooding child: %+v", cfg)
		}
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logs.String(), "extension stdout broke the protocol")
	})
}

// TestExecExtensionEnvironment is the review's probe: an exec extension
// sees the inherited allow-list and its configured env, never the
// gateway's secrets (an upstream key, the database DSN).
func TestExecExtensionEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-gateway-secret")
	t.Setenv("TURNGATE_DATABASE_URL", "postgres://turngate:pw@db/turngate")
	dir := t.TempDir()
	dump := filepath.Join(dir, "env.txt")
	script := filepath.Join(dir, "env.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec cat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	set := New([]config.Extension{{Name: "env", Transport: config.TransportExec, Command: []string{script, dump},
		Env: map[string]string{"EXT_MODE": "audit"}, Hooks: []string{HookAfterToolCall}, Timeout: 5 * time.Second, QueueSize: 8}},
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer set.Close(context.Background())
	var env []string
	waitUntil(t, "the child's environment", func() bool {
		data, err := os.ReadFile(dump)
		env = strings.Split(strings.TrimSpace(string(data)), "\n")
		return err == nil
	})
	if !slices.Contains(env, "EXT_MODE=audit") || !slices.Contains(env, "PATH="+os.Getenv("PATH")) {
		t.Errorf("environment %q: want EXT_MODE=audit and the gateway's PATH", env)
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(childenv.Inherited, name) && name != "EXT_MODE" && name != "PWD" && name != "SHLVL" && name != "_" {
			t.Errorf("the extension inherited %s", kv)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// waitUntil polls cond until it holds, failing after a generous bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the error's text, "" for none
	}{
		{"empty", "", ""},
		{"blank", " \n", ""},
		{"result", `{"result":{"maxSteps":2}}`, ""},
		{"skipped", `{"skipped":true}`, ""},
		{"error", `{"error":"boom"}`, ""},
		{"not JSON", `<html>`, "invalid JSON at byte 1"},
		{"unknown key", `{"reslt":{}}`, `unknown field "reslt"`},
		{"wrong type", `{"result":[1]}`, "result must not be a JSON array"},
		{"trailing data", `{} {}`, "data after its JSON object"},
		{"too large", `{"error":"` + strings.Repeat("x", MaxResponseBytes) + `"}`, "exceeds the 1048576-byte limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResponse([]byte(tc.in))
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ParseResponse = %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "xxxx") {
				t.Errorf("the error echoes the answer: %.80s", err)
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	fields, errs := overrides(map[string]any{"system": "s", "model": "m", "tools": nil, "flavour": 1, "maxSteps": 2})
	if len(fields) != 2 || fields["system"] != "s" || fields["maxSteps"] != 2 {
		t.Errorf("fields %v", fields)
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"flavour: not a field extensions can set", "model: extensions cannot set", "tools: extensions cannot set"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %q", got, want)
		}
	}
}

// TestObservationTraceContext: a queued observation's request carries
// the trace context of the turn that produced it, though it is sent
// later by the worker.
func TestObservationTraceContext(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cfg := httpExt("traced", srv.URL)
	cfg.Hooks = []string{HookAfterToolCall}
	set := New([]config.Extension{cfg}, Options{Logger: slog.New(slog.DiscardHandler)})
	defer set.Close(context.Background())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
	ctx, cancel := context.WithCancel(trace.ContextWithSpanContext(context.Background(), sc))
	set.Wrap(engine.NopHooks{}).AfterToolCall(ctx, &engine.ToolCallResultContext{ToolName: "search", Success: true})
	cancel() // the turn's context ends; the delivery does not depend on it
	if tp := <-got; tp != "00-01020300000000000000000000000000-0405060000000000-01" {
		t.Errorf("traceparent %q, want the turn's trace", tp)
	}
}
