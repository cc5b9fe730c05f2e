package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupChecks: what would fail only at the first turn, or silently
// change who a key is, fails at load.
func TestStartupChecks(t *testing.T) {
	const base = "models: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}]\n"
	tests := []struct {
		name, yaml string
		want       string // "" means valid
	}{
		{"anthropic without a key", "providers: [{name: p, type: anthropic}]\n" + base,
			`providers[0] (p): apiKey is empty: the anthropic API needs one (e.g. apiKey: ${ANTHROPIC_API_KEY})`},
		{"openai with an empty key", "providers: [{name: p, type: openai, apiKey: \"${OPENAI_API_KEY:-}\"}]\n" + base,
			`providers[0] (p): apiKey is empty: the openai API needs one`},
		{"self-hosted openai-compatible server", "providers: [{name: p, type: openai, baseURL: \"http://127.0.0.1:11434/v1\"}]\n" + base, ""},
		{"the same key twice", "auth:\n  apiKeys:\n    - {key: 6f1c2a9e4b7d3085e2a1c9f47b3d6e20, tenant: acme, roles: [user]}\n    - {key: 6f1c2a9e4b7d3085e2a1c9f47b3d6e20, tenant: globex, roles: [admin]}\n",
			`line 4 col 13: auth.apiKeys[1]: the same key as auth.apiKeys[0] (tenant "acme")`},
		{"a key plain and hashed", "auth:\n  apiKeys:\n    - {keySha256: \"E6BE5D3E2A5CA9DA72E9F3B50D0F6E6D3F0E4F53CE5C1F1B2E2A6D0E5B4A9C12\", tenant: acme}\n    - {key: 6f1c2a9e4b7d3085e2a1c9f47b3d6e20, tenant: globex}\n", ""},
		{"a key hashed and plain", "auth:\n  apiKeys:\n    - {keySha256: \"" + sha256Hex("6f1c2a9e4b7d3085e2a1c9f47b3d6e20") + "\", tenant: acme}\n    - {key: 6f1c2a9e4b7d3085e2a1c9f47b3d6e20, tenant: globex, roles: [admin]}\n",
			`auth.apiKeys[1]: the same key as auth.apiKeys[0]`},
		{"a tool schema that does not compile", "tools:\n  - name: t\n    builtin: echo\n    inputSchema: {type: objekt}\n",
			`tools[0] (t): inputSchema: compiling schema`},
		{"negative connection cap", "limits: {maxConnections: -1}\n", `line 1 col 26: limits.maxConnections: must not be negative, not -1`},
		{"negative websocket limit", "websocket: {pingInterval: -1s}\n", `line 1 col 27: websocket.pingInterval: must not be negative, not -1s`},
		{"bad origin pattern", "websocket:\n  originPatterns: [ok.example.com, \"[bad\"]\n", `line 2 col 36: websocket.originPatterns[1]: "[bad" is not a valid host pattern`},
		{"websocket settings", "websocket: {originPatterns: [\"*.example.com\", \"https://app.example.com\"], maxConnections: 2, maxFrameBytes: 1024}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(tc.yaml), env(nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func sha256Hex(s string) string {
	c := Config{Auth: Auth{APIKeys: []APIKey{{Key: s}}}}
	c.hashKeys()
	return c.Auth.APIKeys[0].KeySHA256
}

// TestLoadResolvesPathsAgainstTheConfigDir: relative paths in a config
// file mean files beside it, whatever the working directory.
func TestLoadResolvesPathsAgainstTheConfigDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "turngate.yaml")
	yaml := `providers: [{name: s, type: scripted, script: models/script.yaml}]
rules: {dir: policy}
store: {path: state/turngate.db}
audit: {sink: file, path: logs/audit.jsonl}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // somewhere else
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{
		"providers[0].script": c.Providers[0].Script, "rules.dir": c.Rules.Dir,
		"store.path": c.Store.Path, "audit.path": c.Audit.Path,
	} {
		if !strings.HasPrefix(got, dir+string(filepath.Separator)) {
			t.Errorf("%s = %q, want it under the config's directory %s", name, got, dir)
		}
	}
	abs := filepath.Join(t.TempDir(), "abs.db")
	if err := os.WriteFile(path, []byte("store: {path: "+abs+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(path); err != nil || c.Store.Path != abs {
		t.Errorf("absolute store.path = %q, %v; want it kept", c.Store.Path, err)
	}
}

// TestWeakKeys: a plaintext API key under about 128 bits is a startup
// error at its line and column (the review's "key: user-key-123").
func TestWeakKeys(t *testing.T) {
	tests := []struct {
		key  string
		weak bool
	}{
		{"user-key-123", true},
		{"secret-key-123", true},
		{"acme-demo-key", true},
		{"0123456789abcdef0123456789abcde", true}, // 31 hex digits: 124 bits
		{strings.Repeat("ab", 40), true},          // long, two characters
		{"Tr0ub4dor&3", true},
		{"6f1c2a9e4b7d3085e2a1c9f47b3d6e20", false}, // openssl rand -hex 16
		{"q8ZK3vT1mW0xYb7LcN5pRg", false},           // 22 base64 characters
		{"3f2b8c1e-9d4a-4c7b-a6e5-0f1d2c3b4a59", false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			yaml := "auth:\n  apiKeys:\n    - {key: \"" + tc.key + "\", tenant: acme}\n"
			_, err := Parse("turngate.yaml", []byte(yaml), env(nil))
			switch {
			case tc.weak && err == nil:
				t.Fatal("a weak key was accepted")
			case tc.weak:
				want := "turngate.yaml: line 3 col 13: auth.apiKeys[0].key: the key is too weak to resist guessing ("
				if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
					t.Errorf("error %q, want it to start %q and say how to make a key", err, want)
				}
			case err != nil:
				t.Errorf("a strong key was refused: %v", err)
			}
		})
	}
}
