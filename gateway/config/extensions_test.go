package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// extensionYAML is a valid config with one agent (a) whose extensions
// section is ext.
func extensionYAML(ext string) string {
	return "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}]\n" +
		"extensions:\n" + ext
}

// checkLoad writes data to path and checks what Load reports: want, after
// the path, or nothing when want is "". It reports whether Load failed.
func checkLoad(t *testing.T, path, data, want string) (failed bool) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if want := path + ": " + want; err == nil || err.Error() != want {
		t.Errorf("Load: %v\nwant %s", err, want)
	}
	return true
}

func TestExtensions(t *testing.T) {
	c, err := Parse("t.yaml", []byte(extensionYAML(
		"  - {name: audit, transport: http, url: \"https://ext.example/hook\", secret: \"${EXT_SECRET}\", hooks: [beforeTurn, onChunk], agents: [a]}\n"+
			"  - {name: local, transport: exec, command: [./bin/ext, -v], env: {EXT_TOKEN: \"${EXT_TOKEN}\"}, hooks: [afterToolCall], timeout: 250ms, queueSize: 8}\n")),
		env(map[string]string{"EXT_SECRET": "0123456789abcdef", "EXT_TOKEN": "t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Extensions) != 2 {
		t.Fatalf("extensions = %+v", c.Extensions)
	}
	h, x := c.Extensions[0], c.Extensions[1]
	if h.Secret != "0123456789abcdef" || h.Timeout != DefaultExtensionTimeout || h.QueueSize != DefaultExtensionQueue {
		t.Errorf("http extension %+v: want the secret expanded and the defaults", h)
	}
	if x.Timeout != 250*time.Millisecond || x.QueueSize != 8 || x.Env["EXT_TOKEN"] != "t0ken" {
		t.Errorf("exec extension %+v", x)
	}
	c.resolvePaths("/etc/turngate")
	if got := c.Extensions[1].Command[0]; got != filepath.Join("/etc/turngate", "bin/ext") {
		t.Errorf("command[0] = %q, want it resolved against the config's directory", got)
	}
}

func TestExtensionErrors(t *testing.T) {
	const secret = "secret: 0123456789abcdef, "
	tests := []struct {
		name, ext string
		want      string // the whole error, positioned at the value it is about
	}{
		{"no name", "  - {transport: exec, command: [x], hooks: [onChunk]}\n", "line 5 col 5: extensions[0]: name is required"},
		{"duplicate", "  - {name: e, transport: exec, command: [x], hooks: [onChunk]}\n  - {name: e, transport: exec, command: [x], hooks: [onChunk]}\n",
			`line 6 col 12: extensions[1]: duplicate extension "e"`},
		{"unknown transport", "  - {name: e, transport: grpc, hooks: [onChunk]}\n", `line 5 col 26: extensions[0] (e): transport: must be http or exec, not "grpc"`},
		{"no transport", "  - {name: e, hooks: [onChunk]}\n", `line 5 col 5: extensions[0] (e): transport: must be http or exec, not ""`},
		{"relative url", "  - {name: e, transport: http, url: /hook, " + secret + "hooks: [onChunk]}\n",
			`line 5 col 37: extensions[0] (e): url: must be an absolute http or https URL, not "/hook"`},
		{"no secret", "  - {name: e, transport: http, url: \"http://x/\", hooks: [onChunk]}\n",
			"line 5 col 5: extensions[0] (e): secret: the http transport signs every request; set a secret of at least 16 characters (e.g. secret: ${EXTENSION_SECRET})"},
		{"short secret", "  - {name: e, transport: http, url: \"http://x/\", secret: abc, hooks: [onChunk]}\n",
			"line 5 col 58: extensions[0] (e): secret: the http transport signs every request; set a secret of at least 16 characters (e.g. secret: ${EXTENSION_SECRET})"},
		{"http with a command", "  - {name: e, transport: http, url: \"http://x/\", " + secret + "command: [x], hooks: [onChunk]}\n",
			"line 5 col 85: extensions[0] (e): command: an exec setting; the http transport takes url"},
		{"secret from a missing variable", "  - {name: e, transport: http, url: \"http://x/\", secret: \"${NOPE_SECRET}\", hooks: [onChunk]}\n",
			"line 5 col 58: extensions[0].secret: environment variable NOPE_SECRET is not set (use ${NOPE_SECRET:-default} for a default)"},
		{"exec without command", "  - {name: e, transport: exec, hooks: [onChunk]}\n",
			"line 5 col 5: extensions[0] (e): command: required with transport: exec (the program and its arguments)"},
		{"exec with an empty program", "  - {name: e, transport: exec, command: [\"\"], hooks: [onChunk]}\n",
			"line 5 col 41: extensions[0] (e): command: required with transport: exec (the program and its arguments)"},
		{"exec with a url", "  - {name: e, transport: exec, command: [x], url: \"http://x/\", hooks: [onChunk]}\n",
			"line 5 col 51: extensions[0] (e): url and secret: http settings; the exec transport takes command"},
		{"exec with a secret", "  - {name: e, transport: exec, command: [x], " + secret + "hooks: [onChunk]}\n",
			"line 5 col 54: extensions[0] (e): url and secret: http settings; the exec transport takes command"},
		{"http with env", "  - {name: e, transport: http, url: \"http://x/\", " + secret + "env: {MODE: ro}, hooks: [onChunk]}\n",
			"line 5 col 81: extensions[0] (e): env: an exec setting; the http transport starts no process"},
		{"env name not a variable", "  - {name: e, transport: exec, command: [x], env: {\"MY-MODE\": ro}, hooks: [onChunk]}\n",
			`line 5 col 63: extensions[0] (e): env: "MY-MODE" is not a variable name (letters, digits and '_', not starting with a digit)`},
		{"env misspelt", "  - {name: e, transport: exec, command: [x], environment: {MODE: ro}, hooks: [onChunk]}\n",
			`line 5 col 46: extensions[0]: unknown key "environment"`},
		{"no hooks", "  - {name: e, transport: exec, command: [x]}\n",
			"line 5 col 5: extensions[0] (e): hooks: subscribe to at least one of beforeTurn, beforeToolCall, afterToolCall, onStepFinish, onChunk"},
		{"beforeStep", "  - {name: e, transport: exec, command: [x], hooks: [onChunk, beforeStep]}\n",
			"line 5 col 63: extensions[0] (e): hooks: beforeStep is not dispatched to extensions (as in the reference); use beforeTurn or a CEL rule"},
		{"unknown hook", "  - {name: e, transport: exec, command: [x], hooks: [onChatResponse]}\n",
			`line 5 col 54: extensions[0] (e): hooks: unknown hook "onChatResponse" (want beforeTurn, beforeToolCall, afterToolCall, onStepFinish, onChunk)`},
		{"hook twice", "  - {name: e, transport: exec, command: [x], hooks: [onChunk, onChunk]}\n", "line 5 col 63: extensions[0] (e): hooks: onChunk is listed twice"},
		{"negative timeout", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], timeout: -1s}\n", "line 5 col 73: extensions[0] (e): timeout: must be positive, not -1s"},
		{"negative queue", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], queueSize: -1}\n", "line 5 col 75: extensions[0] (e): queueSize: must be positive, not -1"},
		{"unknown agent", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], agents: [a, ghost]}\n", `line 5 col 76: extensions[0] (e): agents: unknown agent "ghost"`},
		{"misspelt key", "  - {name: e, transport: exec, command: [x], hook: [onChunk]}\n", `line 5 col 46: extensions[0]: unknown key "hook" (did you mean "hooks"?)`},
		{"timeout without a unit", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], timeout: 5}\n",
			`line 5 col 73: extensions[0].timeout must be a duration such as 30s or 1m30s, not "5"`},
		{"queue of words", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], queueSize: many}\n",
			`line 5 col 75: extensions[0].queueSize must be a whole number, not "many"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(extensionYAML(tc.ext)), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			if want := "test.yaml: " + tc.want; err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

// TestExtensionDiagnostics loads the bad configs of testdata/extensions:
// every error is positioned at the line and column of the value it is
// about, all of a file's errors in one pass.
func TestExtensionDiagnostics(t *testing.T) {
	checkReports(t, "testdata/extensions", "env", "exec", "http", "types", "values")
}

// TestExtensionPrograms: Load finds every exec extension's program as the
// gateway will start it (a path with a slash against the config's
// directory, a bare name in PATH) and reports each one it cannot start at
// its line and column, with the other errors; Parse, which has no
// directory, does not look.
func TestExtensionPrograms(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"ok": 0o755, "plain": 0o644} {
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "bin", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	t.Setenv("PATH", bin)
	for _, tc := range []struct {
		name, command, want string // want "" loads
	}{
		{"relative path", "./bin/ok", ""},
		{"absolute path", filepath.Join(bin, "ok"), ""},
		{"bare name in PATH", "ok", ""},
		{"missing", "./bin/missing", "line 8 col 15: extensions[0] (e): command: " + filepath.Join(bin, "missing") + " does not exist"},
		{"not executable", "./bin/plain", "line 8 col 15: extensions[0] (e): command: " + filepath.Join(bin, "plain") + " is not executable"},
		{"a directory", "./bin/dir", "line 8 col 15: extensions[0] (e): command: " + filepath.Join(bin, "dir") + " is a directory"},
		{"bare name not in PATH", "no-such-extension", `line 8 col 15: extensions[0] (e): command: "no-such-extension" is not in PATH (a path with a slash is relative to the config's directory)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "turngate.yaml")
			data := extensionYAML("  - name: e\n    transport: exec\n    hooks: [onChunk]\n    command: [" + tc.command + ", -v]\n")
			if !checkLoad(t, path, data, tc.want) {
				return
			}
			if _, err := Parse(path, []byte(data), env(nil)); err != nil {
				t.Errorf("Parse looked for the program: %v", err)
			}
		})
	}
}

// A missing program is reported with the config's other errors, in one pass.
func TestExtensionProgramsWithOtherErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turngate.yaml")
	data := extensionYAML("  - {name: e, transport: exec, command: [./bin/missing], hooks: [onChunk, beforeStep]}\n")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "line 5 col 42: extensions[0] (e): command: ") ||
		!strings.Contains(lines[1], "line 5 col 75: extensions[0] (e): hooks: beforeStep") {
		t.Errorf("Load: %v\nwant the program's error, then the hook's (in position order)", err)
	}
}
