package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestDefault(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Store.Path != "data/turngate.db" || c.Rules.Dir != "rules" {
		t.Errorf("default config %+v", c)
	}
	a, ok := c.Agent("demo")
	if !ok || a.Model != "demo" || strings.Join(a.Tools, ",") != "weather,search,delete" {
		t.Errorf("demo agent %+v", a)
	}
	if c.Limits.MaxQueuedTurnsPerSession != DefaultMaxQueuedTurnsPerSession || c.Limits.TurnTimeout != DefaultTurnTimeout {
		t.Errorf("limits %+v", c.Limits)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "listen: x\nlisten2: y\n", []string{"line 2", "listen2"}},
		{"unknown nested key", "agents:\n  - name: a\n    model: m\n    modle: m\n", []string{"line 4", "modle"}},
		{"unknown tool key", "tools:\n  - name: t\n    http: {url: http://x, verb: GET}\n", []string{"line 3", "verb"}},
		{"wrong type", "limits:\n  maxMessages: many\n", []string{"line 2"}},
		{"missing env var", "providers:\n  - name: p\n    type: openai\n    apiKey: ${NOPE_KEY}\n", []string{"line 4: providers[0].apiKey", "NOPE_KEY is not set"}},
		{"bad provider type", "providers:\n  - name: p\n    type: llama\n", []string{"type must be"}},
		{"unknown alias", "agents:\n  - name: a\n    model: ghost\n", []string{"line 2: agents[0] (a)", "unknown model alias \"ghost\""}},
		{"unknown tool", "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents:\n  - {name: a, model: m, tools: [nope]}\n", []string{"unknown tool \"nope\""}},
		{"key and hash", "auth:\n  apiKeys:\n    - {key: k, keySha256: abc, tenant: t}\n", []string{"exactly one of key and keySha256"}},
		{"file sink without path", "audit: {sink: file}\n", []string{"audit.path"}},
		{"duplicate agent", "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}, {name: a, model: m}]\n", []string{"line 3: agents[1]: duplicate agent"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "test.yaml: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	yaml := `
providers:
  - name: p
    type: openai
    apiKey: ${KEY}
    baseURL: ${BASE:-http://localhost:11434/v1}
    headers: {X-Org: "org-${ORG}", X-Cost: "$$5"}
models: {m: {provider: p, model: x}}
auth:
  apiKeys:
    - {key: "${GATEWAY_KEY}", tenant: t}
limits:
  turnTimeout: 90s
`
	c, err := Parse("t.yaml", []byte(yaml), env(map[string]string{"KEY": "sk-1", "ORG": "acme", "GATEWAY_KEY": "g"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers[0]
	if p.APIKey != "sk-1" || p.BaseURL != "http://localhost:11434/v1" || p.Headers["X-Org"] != "org-acme" || p.Headers["X-Cost"] != "$5" {
		t.Errorf("expanded provider %+v", p)
	}
	if c.Auth.APIKeys[0].Key != "g" || c.Limits.TurnTimeout != 90*time.Second {
		t.Errorf("config %+v", c)
	}
}

func TestExpand(t *testing.T) {
	lookup := env(map[string]string{"A": "1", "EMPTY": ""})
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${A}", "1", ""},
		{"x${A}y${A}", "x1y1", ""},
		{"${EMPTY:-d}", "d", ""},
		{"${EMPTY}", "", ""},
		{"${MISSING:-}", "", ""},
		{"$A", "$A", ""},
		{"$$", "$", ""},
		{"${MISSING}", "", "MISSING is not set"},
		{"${A", "", "unterminated"},
		{"${1X}", "", "invalid environment variable name"},
	}
	for _, tc := range tests {
		got, err := expand(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("expand(%q) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParse checks that no config text panics the decoder, the expansion
// or the validation.
func FuzzParse(f *testing.F) {
	f.Add([]byte("listen: x"))
	f.Add(DefaultYAML())
	if data, err := os.ReadFile(filepath.Join("..", "testdata", "config.yaml")); err == nil {
		f.Add(data)
	}
	f.Add([]byte("agents: [{name: a, model: ${X:-m}}]\nlimits: {turnTimeout: 1s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse("fuzz.yaml", data, env(map[string]string{"X": "y"}))
	})
}
