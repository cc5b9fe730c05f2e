package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestCheckConfig runs `turngate check-config` on good and broken configs:
// the errors serve would stop at, without serving; an unreachable MCP
// server is a warning that names the server.
func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name, extra string
		code        int
		stdout      string
		stderr      []string
	}{
		{name: "valid", code: 0, stdout: "ok: "},
		{name: "provider without a key", extra: "providers: [{name: scripted, type: scripted}, {name: claude, type: anthropic}]\n", code: 1,
			stderr: []string{`providers[1] (claude): apiKey is empty`}},
		{name: "duplicate api key", extra: "auth:\n  apiKeys:\n    - {key: 5e0c9a7b3d1f8e2a6c4b0d9f7e3a1c5b, tenant: a}\n    - {key: 5e0c9a7b3d1f8e2a6c4b0d9f7e3a1c5b, tenant: b, roles: [admin]}\n", code: 1,
			stderr: []string{`auth.apiKeys[1]: the same key as auth.apiKeys[0]`}},
		{name: "weak api key", extra: "auth:\n  apiKeys:\n    - {key: user-key-123, tenant: a}\n", code: 1,
			stderr: []string{`auth.apiKeys[0].key: the key is too weak to resist guessing (about 73 bits; at least 128 bits are needed)`}},
		{name: "misspelt key", extra: "limits: {maxConection: 3}\n", code: 1,
			stderr: []string{`limits: unknown key "maxConection" (did you mean "maxConnections"?)`}},
		{name: "unreachable MCP server", code: 0, stdout: "ok: ",
			extra:  "mcpServers:\n  - {name: fs, transport: stdio, command: turngate-no-such-mcp-server}\n",
			stderr: []string{`mcp server \"fs\"`, "turngate-no-such-mcp-server"}},
		{name: "public listen without keys", extra: "listen: 0.0.0.0:8080\n", code: 1,
			stderr: []string{"turngate.yaml: line 10 col 9: refusing to listen on 0.0.0.0:8080 without API keys"}},
		{name: "missing rules directory", extra: "rules: {dir: ./no-rules, watch: false}\n", code: 1,
			stderr: []string{"turngate.yaml: line 9 col 14: loading rules from ", "no-rules"}},
		{name: "invalid MCP server", extra: "mcpServers:\n  - {name: fs, transport: http, url: /mcp}\n", code: 1,
			stderr: []string{"turngate.yaml: line 11 col 38: mcpServers[0] (fs): url: must be an http or https URL with a host"}},
		{name: "missing script", extra: "providers: [{name: scripted, type: scripted, script: ./nope.yaml}]\n", code: 1,
			stderr: []string{"turngate.yaml: line 9 col 54: providers[0] (scripted): script: open ", "nope.yaml: no such file or directory"}},
		{name: "missing context file", code: 1,
			extra:  "agents:\n  - name: demo\n    model: demo\n    session: {context: [{name: policies, file: policies.md}]}\n",
			stderr: []string{"turngate.yaml: line 11 col 48: agents[0].session.context[0] (policies): file: open ", "policies.md: no such file or directory"}},
		{name: "script that is a directory", extra: "providers: [{name: scripted, type: scripted, script: ./rules}]\n", code: 1,
			stderr: []string{"turngate.yaml: line 9 col 54: providers[0] (scripted): script: read ", "rules: is a directory"}},
		{name: "missing extension program", code: 1,
			extra:  "extensions:\n  - {name: local, transport: exec, command: [./bin/no-such-extension], hooks: [afterToolCall]}\n",
			stderr: []string{"turngate.yaml: line 11 col 46: extensions[0] (local): command: ", "bin/no-such-extension does not exist"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeServeConfig(t, "")
			if tc.extra != "" {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				// Later keys replace the base config's (providers, agents,
				// rules: each line and the indented ones under it) or add to it.
				cfg := string(data)
				for _, key := range []string{"providers:", "agents:", "rules:"} {
					if strings.HasPrefix(tc.extra, key) {
						cfg = regexp.MustCompile(`(?m)^`+key+`.*\n(?:[ \t].*\n)*`).ReplaceAllString(cfg, "")
					}
				}
				if err := os.WriteFile(path, []byte(cfg+tc.extra), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"check-config", path}, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, &stdout, &stderr)
			}
			if !strings.HasPrefix(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q, want it to start with %q", &stdout, tc.stdout)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not contain %q", &stderr, w)
				}
			}
		})
	}
}

// TestHelpAndVersion: --help exits 0 for serve as for every command, and
// version names the version, the commit and the Go version.
func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"check-config", "--help"}, {"--help"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr); code != 0 {
			t.Errorf("turngate %s: exit code %d, want 0\n%s", strings.Join(args, " "), code, &stderr)
		}
		if stderr.Len() == 0 {
			t.Errorf("turngate %s printed no usage", strings.Join(args, " "))
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &stdout, io.Discard); code != 0 {
		t.Fatalf("version: exit code %d", code)
	}
	if want := "(commit "; !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), runtime.Version()) {
		t.Errorf("version printed %q, want the commit and %s", &stdout, runtime.Version())
	}
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(info), "turngate v1.2.3 (commit 0123abc+dirty, "+runtime.Version()+")"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}

// TestDefaultConfigWithoutRulesDir: with no --config in a directory that
// has no rules/, serve uses the rule set compiled into the binary; with a
// rules/ directory it uses that (the quick start from the repository root).
func TestDefaultConfigWithoutRulesDir(t *testing.T) {
	t.Chdir(t.TempDir())
	_, rulesFS, err := loadConfig("", discardLog())
	if err != nil || rulesFS == nil {
		t.Fatalf("empty directory: rules %v, err %v; want the embedded rules", rulesFS, err)
	}
	if err := os.Mkdir("rules", 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, rulesFS, err := loadConfig("", discardLog())
	if err != nil || rulesFS != nil || cfg.Rules.Dir != "rules" {
		t.Fatalf("with ./rules: rules FS %v, dir %q, err %v; want ./rules", rulesFS, cfg.Rules.Dir, err)
	}
	if _, err := os.Stat(filepath.Join("data")); err == nil {
		t.Error("loading the config created ./data")
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestServeFailsBeforeCreatingTheStore: a config that cannot serve (here:
// its rules directory is missing) fails before the store creates its file,
// and its relative paths are the config directory's, not the working
// directory's.
func TestServeFailsBeforeCreatingTheStore(t *testing.T) {
	cfgDir := t.TempDir()
	path := filepath.Join(cfgDir, "turngate.yaml")
	cfg := "providers: [{name: s, type: scripted}]\nmodels: {demo: {provider: s, model: demo}}\n" +
		"agents: [{name: demo, model: demo}]\nrules: {dir: missing-rules}\nstore: {path: data/turngate.db}\naudit: {sink: none}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	t.Chdir(work)
	err := serve(context.Background(), serveParams{ConfigPath: path, Listen: "127.0.0.1:0", Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(cfgDir, "missing-rules")) {
		t.Fatalf("serve = %v, want the missing rules directory beside the config named", err)
	}
	for _, dir := range []string{filepath.Join(cfgDir, "data"), filepath.Join(work, "data")} {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s was created by a serve that failed", dir)
		}
	}
}
