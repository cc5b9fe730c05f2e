package liveconfig

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy"
)

// base is the config the tests edit; its line numbers are in the tests'
// expectations.
const base = `listen: 127.0.0.1:8080
providers: [{name: scripted, type: scripted}]
models: {demo: {provider: scripted, model: demo}}
tools:
  - {name: weather, builtin: weather}
  - {name: search, builtin: search}
agents:
  - {name: demo, model: demo, tools: [weather]}
store: {path: db/t.db}
limits: {maxMessages: 100}
auth:
  apiKeys:
    - {key: "0123456789abcdef0123456789abcdef", tenant: acme, subject: ops, roles: [admin]}
`

// withQuotas is base with a turn quota (line 10) and a token budget
// (line 11).
var withQuotas = strings.Replace(base, "store:", "quotas:\n"+
	"  - {name: turns, per: tenant, turns: 10, window: hour}\n"+
	"  - {name: tokens, per: tenant, inputTokens: 1000, window: day}\nstore:", 1)

// newKey is a second API key the edits add.
const newKey = "    - {key: \"fedcba9876543210fedcba9876543210\", tenant: beta, subject: app}\n"

// writeConfig writes text to path.
func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// load writes text to path and loads it.
func load(t *testing.T, path, text string) *config.Config {
	t.Helper()
	writeConfig(t, path, text)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name string
		from string // the live text; "" is base
		edit func(string) string
		want []string // each a restart error, after "FILE: "
	}{
		{name: "a key added", edit: func(s string) string { return s + newKey }},
		{name: "limits, tool lists, JWT", edit: func(s string) string {
			s = strings.Replace(s, "maxMessages: 100", "maxMessages: 50, maxBodyBytes: 1024, turnTimeout: 1m, "+
				"toolTimeout: 5s, maxToolOutputBytes: 100, maxConcurrentTools: 2, streamKeepAlive: 1s, maxQueuedTurnsPerSession: 1", 1)
			s = strings.Replace(s, "tools: [weather]}", "tools: [weather, search], activeTools: [search]}", 1)
			return s + "  jwt: {issuer: https://idp.example.com, audience: tg, jwksURL: https://idp.example.com/keys, tenant: acme}\n"
		}},
		{name: "a comment", edit: func(s string) string { return "# reviewed\n" + s }},
		{name: "listen", edit: func(s string) string { return strings.Replace(s, "8080", "9090", 1) },
			want: []string{"line 1 col 9: listen changed: needs a restart"}},
		{name: "store and a model", edit: func(s string) string {
			s = strings.Replace(s, "db/t.db", "db/other.db", 1)
			return strings.Replace(s, "model: demo}}", "model: demo-2}}", 1)
		}, want: []string{"line 3 col 44: models.demo.model changed: needs a restart", "line 9 col 15: store.path changed: needs a restart"}},
		{name: "an agent's maxSteps", edit: func(s string) string {
			return strings.Replace(s, "{name: demo, model: demo,", "{name: demo, model: demo, maxSteps: 3,", 1)
		}, want: []string{"line 8 col 41: agents[0].maxSteps changed: needs a restart"}},
		{name: "an agent added", edit: func(s string) string {
			return strings.Replace(s, "store:", "  - {name: other, model: demo}\nstore:", 1)
		}, want: []string{"line 8 col 3: agents changed: needs a restart"}},
		{name: "quotas' limits", from: withQuotas, edit: func(s string) string {
			return strings.NewReplacer("turns: 10", "turns: 3", "inputTokens: 1000", "inputTokens: 50").Replace(s)
		}},
		{name: "what a quota limits", from: withQuotas, edit: func(s string) string {
			return strings.Replace(s, "inputTokens: 1000", "outputTokens: 1000", 1)
		}, want: []string{"line 11 col 47: quotas[1].outputTokens changed: needs a restart"}},
		{name: "a quota's window", from: withQuotas, edit: func(s string) string {
			return strings.Replace(s, "window: hour", "window: day", 1)
		}, want: []string{"line 10 col 51: quotas[0].window changed: needs a restart"}},
		{name: "a quota added", edit: func(string) string { return withQuotas },
			want: []string{"quotas changed: needs a restart"}},
		{name: "every key removed", edit: func(s string) string { return s[:strings.Index(s, "auth:")] },
			want: []string{"line 1 col 1: auth changed: needs a restart"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "turngate.yaml")
			from := cmp.Or(tc.from, base)
			live, next := load(t, path, from), load(t, path, tc.edit(from))
			err := Diff(live, next)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Diff = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Diff = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Diff = %v\nwant it to say %q", err, w)
				}
			}
			if len(config.Flatten(err)) < len(tc.want) {
				t.Errorf("Diff = %v: %d errors, want %d", err, len(config.Flatten(err)), len(tc.want))
			}
		})
	}
}

// applied records what a Manager applied.
type applied struct {
	mu      sync.Mutex
	configs []*config.Config
	fail    error
	results []string
}

func (a *applied) apply(c *config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.configs = append(a.configs, c)
	return nil
}

func (a *applied) onReload(result string, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.results = append(a.results, result)
}

func (a *applied) keys() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.configs) == 0 {
		return -1
	}
	return len(a.configs[len(a.configs)-1].Auth.APIKeys)
}

func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turngate.yaml")
	writeConfig(t, path, base)
	live, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &applied{}
	m := New(path, live, Options{Apply: rec.apply, OnReload: rec.onReload, Logger: discard()})
	at := func(line, col int) policy.Location { return policy.Location{File: path, Line: line, Column: col} }
	for _, step := range []struct {
		name    string
		text    string // "" removes the file
		fail    error  // Apply's answer
		changed bool
		// code and loc are the rejection's first diagnostic; "" means accepted
		// (or unchanged).
		code    string
		loc     policy.Location
		message string
		keys    int // the live config's API keys after the step
	}{
		{name: "unchanged", text: base, keys: 1},
		{name: "a key added", text: base + newKey, changed: true, keys: 2},
		{name: "a syntax error", text: base + newKey + "\t- {key: x}\n", code: CodeInvalid, loc: at(15, 1), message: "invalid YAML: found character that cannot start any token", keys: 2},
		{name: "the same syntax error again", text: base + newKey + "\t- {key: x}\n", code: CodeInvalid, loc: at(15, 1), keys: 2},
		{name: "an invalid value", text: strings.Replace(base+newKey, "maxMessages: 100", "maxMessages: -5", 1), code: CodeInvalid, loc: at(10, 23), message: "limits.maxMessages: must not be negative, not -5", keys: 2},
		{name: "a restart-only change", text: strings.Replace(base+newKey, "db/t.db", "db/other.db", 1), code: CodeRestart, loc: at(9, 15), message: "store.path changed: needs a restart", keys: 2},
		{name: "refused by the gateway", text: base, fail: errors.New("jwt verifier: no"), code: CodeInvalid, loc: policy.Location{File: path}, message: "jwt verifier: no", keys: 2},
		{name: "the file removed", code: policy.CodeIO, loc: policy.Location{File: path}, keys: 2},
		{name: "the key removed again", text: base, changed: true, keys: 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.text == "" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				writeConfig(t, path, step.text)
			}
			rec.mu.Lock()
			rec.fail = step.fail
			rec.mu.Unlock()
			before := m.Status()
			changed, err := m.Reload()
			st := m.Status()
			if changed != step.changed {
				t.Errorf("changed = %v, want %v (err %v)", changed, step.changed, err)
			}
			if got := len(m.Current().Auth.APIKeys); got != step.keys {
				t.Errorf("live config has %d keys, want %d", got, step.keys)
			}
			if step.code == "" {
				if err != nil || st.LastError != nil {
					t.Fatalf("Reload = %v, status error %v; want accepted", err, st.LastError)
				}
				if step.changed && (st.Revision == before.Revision || st.ReloadsOK != before.ReloadsOK+1 || !st.Reloads[0].Accepted || rec.keys() != step.keys) {
					t.Errorf("status after an accepted reload = %+v (before %+v), applied %d keys", st, before, rec.keys())
				}
				return
			}
			var errs policy.Errors
			if !errors.As(err, &errs) || len(st.LastError) == 0 {
				t.Fatalf("Reload = %v, status error %v; want a rejection", err, st.LastError)
			}
			got := st.LastError[0]
			if got.Code != step.code || got.Location != step.loc || step.message != "" && got.Message != step.message {
				t.Errorf("rejected with %+v at %v, want %s at %v %q", got, got.Location, step.code, step.loc, step.message)
			}
			if st.Revision != before.Revision {
				t.Errorf("a rejected reload changed the revision to %s", st.Revision)
			}
		})
	}
	st := m.Status()
	// The same broken text, and the same missing file, are rejected once.
	if st.ReloadsOK != 2 || st.ReloadsRejected != 5 || len(st.Reloads) != 7 {
		t.Errorf("status counts ok %d rejected %d, history %d; want 2, 5, 7", st.ReloadsOK, st.ReloadsRejected, len(st.Reloads))
	}
	want := "unchanged accepted rejected rejected rejected rejected rejected accepted"
	if got := strings.Join(rec.results, " "); got != want {
		t.Errorf("OnReload results %q, want %q", got, want)
	}
}

func TestWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path, text string)
		// relative runs the Manager on "turngate.yaml" in the file's
		// directory, as `turngate serve --config turngate.yaml` does.
		relative bool
	}{
		{name: "write in place", write: writeConfig},
		{name: "relative path", write: writeConfig, relative: true},
		{name: "editor rename over", write: func(t *testing.T, path, text string) {
			tmp := filepath.Join(filepath.Dir(path), ".turngate.yaml.swp")
			writeConfig(t, tmp, text)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "turngate.yaml")
			if tc.relative {
				t.Chdir(filepath.Dir(path))
				path = "turngate.yaml"
			}
			writeConfig(t, path, base)
			live, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rec := &applied{}
			// No poll: a passing test proves the file watch.
			m := New(path, live, Options{Apply: rec.apply, PollInterval: -1, Debounce: 10 * time.Millisecond, Logger: discard()})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Watch(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Watch: %v", err)
				}
			}()
			waitFor(t, "the watch's first look", func() bool { return m.Status().LastCheck != nil })
			tc.write(t, path, base+newKey)
			waitFor(t, "the added key to be live", func() bool { return len(m.Current().Auth.APIKeys) == 2 && rec.keys() == 2 })
		})
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
