package gateway

import (
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

func TestNewResolver(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`
providers:
  - {name: s, type: scripted}
  - {name: o, type: openai, baseURL: "http://127.0.0.1:1/v1"}
  - {name: a, type: anthropic, apiKey: k}
models:
  fast: {provider: o, model: gpt-x}
  demo: {provider: s, model: demo}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, id string }{{"fast", "gpt-x"}, {"demo", "demo"}, {"a/claude-x", "claude-x"}}
	for _, tc := range tests {
		if _, id, err := r.Resolve(tc.name); err != nil || id != tc.id {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.name, id, err, tc.id)
		}
	}
	if _, _, err := r.Resolve("nope"); err == nil {
		t.Error("an unknown model resolved")
	}
	cfg.Providers[0].Script = "testdata/missing.yaml"
	if _, err := NewResolver(cfg); err == nil {
		t.Error("a missing script file was accepted")
	}
}
