package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/liveconfig"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// Keys of the live configuration tests: the admin's is in every config,
// the app's is added by an edit.
const (
	liveAdminKey = "0123456789abcdef0123456789abcdef"
	liveAppKey   = "fedcba9876543210fedcba9876543210"
)

// liveBase is the config the live tests edit (its line numbers are in
// their expectations); TOOLURL is the lookup tool's server.
const liveBase = `providers: [{name: scripted, type: scripted, script: script.yaml}]
models: {demo: {provider: scripted, model: demo}}
tools:
  - {name: weather, builtin: weather}
  - {name: lookup, http: {url: "TOOLURL"}}
agents:
  - {name: demo, model: demo, tools: [weather, lookup]}
store: {path: db/t.db}
rules: {dir: rules, watch: false}
audit: {sink: none}
limits: {maxMessages: 100}
auth:
  apiKeys:
    - {key: "` + liveAdminKey + `", tenant: acme, subject: ops, roles: [admin, global-admin]}
`

// liveAppKeyLine adds the app's key to liveBase.
const liveAppKeyLine = `    - {key: "` + liveAppKey + `", tenant: acme, subject: app}
`

// liveScript is the scripted model of the live tests: "look up" calls
// lookup twice, one step after the other, then answers with the second
// output.
const liveScript = `rules:
  - name: second
    when: {toolResult: {tool: lookup, contains: first}}
    reply: {toolCalls: [{name: lookup, input: {id: second}}]}
  - name: done
    when: {toolResult: {tool: lookup}}
    reply: {text: 'done: ${output}'}
  - name: start
    when: {user: {regex: 'look up'}}
    reply: {toolCalls: [{name: lookup, input: {id: first}}]}
`

// liveSetup is a directory with the live tests' config, rules and script.
type liveSetup struct {
	dir, path string
	toolURL   string
}

// newLiveSetup writes the script and the rules; write writes the config.
func newLiveSetup(t *testing.T, toolURL string) *liveSetup {
	t.Helper()
	dir := t.TempDir()
	writeRules(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(liveScript), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &liveSetup{dir: dir, path: filepath.Join(dir, "turngate.yaml"), toolURL: toolURL}
	s.write(t, liveBase)
	return s
}

// write makes text (TOOLURL replaced) the config file and returns its
// revision.
func (s *liveSetup) write(t *testing.T, text string) string {
	t.Helper()
	text = strings.ReplaceAll(text, "TOOLURL", s.toolURL)
	if err := os.WriteFile(s.path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return config.TextRevision([]byte(text))
}

// configStatus is GET /v1/admin/config as the admin sees it.
func configStatus(t *testing.T, addr string) liveconfig.Status {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/admin/config", nil)
	req.Header.Set("Authorization", "Bearer "+liveAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st liveconfig.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		t.Fatalf("GET /v1/admin/config: %d", resp.StatusCode)
	}
	return st
}

// metricsText returns the gateway's /metrics.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// eventually polls cond until it holds, failing the test after a generous
// deadline with what cond last reported.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

// agentsStatus is the status of GET /v1/agents with key.
func agentsStatus(t *testing.T, addr, key string) int {
	return statusOf(t, "GET", "http://"+addr+"/v1/agents", key, "")
}

// TestServeLiveConfig edits a running gateway's config file: an added key
// works without a restart; a syntax error, an invalid value and a change
// that needs a restart are each rejected with their file:line:col in GET
// /v1/admin/config and turngate_config_reload_rejected, while the keys of
// the last good config keep working; reverting the file heals it.
func TestServeLiveConfig(t *testing.T) {
	s := newLiveSetup(t, "http://127.0.0.1:1/unused")
	r := startServe(t, s.path)
	if got := agentsStatus(t, r.addr, liveAppKey); got != http.StatusUnauthorized {
		t.Fatalf("the app's key before it is configured: %d, want 401", got)
	}
	good := s.write(t, liveBase+liveAppKeyLine)
	eventually(t, "the added key to work", func() (bool, string) {
		got := agentsStatus(t, r.addr, liveAppKey)
		return got == http.StatusOK, fmt.Sprint(got)
	})
	// The key works once the config is applied; the status follows.
	eventually(t, "the status to show the reload", func() (bool, string) {
		st := configStatus(t, r.addr)
		return st.Revision == good && st.ReloadsOK == 1 && st.File == s.path && st.LastError == nil, fmt.Sprintf("%+v, want revision %s", st, good)
	})

	for i, tc := range []struct {
		name       string
		text       string
		code       string
		line, col  int
		message    string
		rejections int
	}{
		{name: "syntax error", text: liveBase + liveAppKeyLine + "\t- {key: x}\n",
			code: liveconfig.CodeInvalid, line: 16, col: 1, message: "invalid YAML: found character that cannot start any token"},
		{name: "invalid value", text: strings.Replace(liveBase+liveAppKeyLine, "maxMessages: 100", "maxMessages: -5", 1),
			code: liveconfig.CodeInvalid, line: 11, col: 23, message: "limits.maxMessages: must not be negative, not -5"},
		{name: "needs a restart", text: strings.Replace(liveBase+liveAppKeyLine, "db/t.db", "db/other.db", 1),
			code: liveconfig.CodeRestart, line: 8, col: 15, message: "store.path changed: needs a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.write(t, tc.text)
			want := policy.Location{File: s.path, Line: tc.line, Column: tc.col}
			eventually(t, "the rejection in the admin API", func() (bool, string) {
				st := configStatus(t, r.addr)
				if len(st.LastError) == 0 {
					return false, "no error"
				}
				e := st.LastError[0]
				return e.Code == tc.code && e.Location == want && e.Message == tc.message, fmt.Sprintf("%+v at %v", e, e.Location)
			})
			st := configStatus(t, r.addr)
			if st.Revision != good || st.ReloadsRejected != int64(i+1) || st.Reloads[0].Accepted {
				t.Errorf("status after the rejection: %+v", st)
			}
			m := metricsText(t, r.addr)
			for _, line := range []string{"turngate_config_reload_rejected 1",
				fmt.Sprintf(`turngate_config_reloads_total{result="rejected"} %d`, i+1), `turngate_config_reloads_total{result="accepted"} 1`} {
				if !strings.Contains(m, line+"\n") {
					t.Errorf("metrics lack %q", line)
				}
			}
			for _, key := range []string{liveAdminKey, liveAppKey} {
				if got := agentsStatus(t, r.addr, key); got != http.StatusOK {
					t.Errorf("a key of the last good config: %d", got)
				}
			}
		})
	}

	s.write(t, liveBase+liveAppKeyLine) // reverted: the live text again
	eventually(t, "the rejection to clear", func() (bool, string) {
		st := configStatus(t, r.addr)
		return st.LastError == nil && strings.Contains(metricsText(t, r.addr), "turngate_config_reload_rejected 0\n"), fmt.Sprint(st.LastError)
	})
	if got := statusOf(t, "GET", "http://"+r.addr+"/v1/admin/config", liveAppKey, ""); got != http.StatusForbidden {
		t.Errorf("GET /v1/admin/config without the admin role: %d, want 403", got)
	}
}

// TestServeLiveConfigRunningTurn reloads the config in the middle of a
// turn that calls lookup twice: the reload drops lookup from the agent,
// yet the running turn's second call runs (it finishes on the config it
// started with), while the next turn has no lookup.
func TestServeLiveConfigRunningTurn(t *testing.T) {
	var calls atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if calls.Add(1) == 1 {
			close(first)
			<-release
		}
		fmt.Fprintf(w, `{"found": %q}`, in.ID)
	}))
	defer tool.Close()
	s := newLiveSetup(t, tool.URL)
	r := startServe(t, s.path)

	chat := func(session string) string {
		body := fmt.Sprintf(`{"id":%q,"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"look up"}]}]}`, session)
		req, _ := http.NewRequest("POST", "http://"+r.addr+"/v1/agents/demo/chat", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+liveAdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	done := make(chan string, 1)
	go func() { done <- chat("running") }()
	select {
	case <-first:
	case out := <-done:
		t.Fatalf("the turn ended before its first lookup: %s", out)
	}
	rev := s.write(t, strings.Replace(liveBase, "tools: [weather, lookup]", "tools: [weather]", 1))
	eventually(t, "the reload", func() (bool, string) {
		st := configStatus(t, r.addr)
		return st.Revision == rev, fmt.Sprint(st.Revision, st.LastError)
	})
	close(release)
	if out := <-done; !strings.Contains(out, `"output":"{\"found\": \"second\"}"`) || !strings.Contains(out, `"finishReason":"stop"`) {
		t.Errorf("the running turn did not finish on its config (two lookups):\n%s", out)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("lookup ran %d times in the running turn, want 2", n)
	}
	out := chat("after")
	if n := calls.Load(); n != 2 || !strings.Contains(out, "but it is not o") {
		t.Errorf("a turn after the reload ran lookup (%d calls):\n%s", n, out)
	}
}

// TestReloadOnHangup sends the test process a real SIGHUP: through
// signal.Notify, as serve sets it up, one signal reloads the rules and the
// config file.
func TestReloadOnHangup(t *testing.T) {
	s := newLiveSetup(t, "http://127.0.0.1:1/unused")
	cfg, err := config.Load(s.path)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ruleset.NewManager(cfg.Rules.Dir, ruleset.Options{PollInterval: -1}, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan *config.Config, 1)
	live := liveconfig.New(s.path, cfg, liveconfig.Options{Logger: discardLog(),
		Apply: func(c *config.Config) error { applied <- c; return nil }})

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // before the signal is sent: SIGHUP would end the process
	defer signal.Stop(hup)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { reloadOnHangup(ctx, hup, discardLog(), rules, live); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	rev := s.write(t, liveBase+liveAppKeyLine)
	rego := "package turngate.tool_call\n\nblock contains \"no weather\" if input.tool.name == \"weather\"\n"
	if err := os.WriteFile(filepath.Join(s.dir, "rules", "tools.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	before := rules.Current().ID()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-applied:
		if c.Revision() != rev || len(c.Auth.APIKeys) != 2 {
			t.Errorf("SIGHUP applied revision %s with %d keys, want %s with 2", c.Revision(), len(c.Auth.APIKeys), rev)
		}
	case <-time.After(time.Minute):
		t.Fatal("SIGHUP did not reload the config")
	}
	if rules.Current().ID() == before {
		t.Error("SIGHUP did not reload the rules")
	}
}
