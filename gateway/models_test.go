package gateway

import (
	"os"
	"path/filepath"
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
}

// TestNewResolverErrors: every provider NewResolver cannot build is
// reported, each at its setting in the config file; a script's own errors
// name their line in the script.
func TestNewResolverErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("rules: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "turngate.yaml")
	for _, tc := range []struct {
		name, providers string
		change          func(*config.Config) // what Validate would refuse, set after Load
		want            string               // each line after the config's path
	}{
		{"missing script", "  - {name: s, type: scripted, script: missing.yaml}\n", nil,
			"line 2 col 39: providers[0] (s): script: open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
		{"script of two providers", "  - {name: s, type: scripted, script: scripts}\n  - {name: t, type: scripted, script: nope.yaml}\n", nil,
			"line 2 col 39: providers[0] (s): script: read " + filepath.Join(dir, "scripts") + ": is a directory\n" +
				path + ": line 3 col 39: providers[1] (t): script: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory"},
		{"type", "  - {name: s, type: scripted}\n", func(c *config.Config) { c.Providers[0].Type = "llama" },
			`line 2 col 21: providers[0] (s): type: must be openai, anthropic or scripted, not "llama"`},
		{"alias of no provider", "  - {name: s, type: scripted}\n", func(c *config.Config) { c.Models["demo"] = config.Model{Provider: "ghost", Model: "x"} },
			`line 4 col 3: building model registry: alias "demo": unknown provider "ghost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := "providers:\n" + tc.providers + "models:\n  demo: {provider: s, model: demo}\n"
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				tc.change(cfg)
			}
			_, err = NewResolver(cfg)
			if want := path + ": " + tc.want; err == nil || err.Error() != want {
				t.Errorf("NewResolver: %v\nwant %s", err, want)
			}
		})
	}
	t.Run("script that does not parse", func(t *testing.T) {
		cfg, err := config.Parse("t.yaml", []byte("providers: [{name: s, type: scripted, script: "+filepath.Join(dir, "bad.yaml")+"}]\n"), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewResolver(cfg)
		if want := filepath.Join(dir, "bad.yaml") + ":1: schema_error: got a number, want a list"; err == nil || err.Error() != want {
			t.Errorf("NewResolver: %v\nwant the script's own error, %s", err, want)
		}
	})
}
