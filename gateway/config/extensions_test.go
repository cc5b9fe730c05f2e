package config

import (
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

func TestExtensions(t *testing.T) {
	c, err := Parse("t.yaml", []byte(extensionYAML(
		"  - {name: audit, transport: http, url: \"https://ext.example/hook\", secret: \"${EXT_SECRET}\", hooks: [beforeTurn, onChunk], agents: [a]}\n"+
			"  - {name: local, transport: exec, command: [./bin/ext, -v], hooks: [afterToolCall], timeout: 250ms, queueSize: 8}\n")),
		env(map[string]string{"EXT_SECRET": "0123456789abcdef"}))
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
	if x.Timeout != 250*time.Millisecond || x.QueueSize != 8 {
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
		want      []string
	}{
		{"no name", "  - {transport: exec, command: [x], hooks: [onChunk]}\n", []string{"line 5: extensions[0]: name is required"}},
		{"duplicate", "  - {name: e, transport: exec, command: [x], hooks: [onChunk]}\n  - {name: e, transport: exec, command: [x], hooks: [onChunk]}\n",
			[]string{"line 6: extensions[1]: duplicate extension \"e\""}},
		{"unknown transport", "  - {name: e, transport: grpc, hooks: [onChunk]}\n", []string{"line 5: extensions[0] (e): transport: must be http or exec, not \"grpc\""}},
		{"relative url", "  - {name: e, transport: http, url: /hook, " + secret + "hooks: [onChunk]}\n", []string{"url: must be an absolute http or https URL"}},
		{"no secret", "  - {name: e, transport: http, url: \"http://x/\", hooks: [onChunk]}\n", []string{"secret: the http transport signs every request"}},
		{"short secret", "  - {name: e, transport: http, url: \"http://x/\", secret: abc, hooks: [onChunk]}\n", []string{"at least 16 characters"}},
		{"secret from a missing variable", "  - {name: e, transport: http, url: \"http://x/\", secret: \"${NOPE_SECRET}\", hooks: [onChunk]}\n",
			[]string{"extensions[0].secret", "NOPE_SECRET is not set"}},
		{"exec without command", "  - {name: e, transport: exec, hooks: [onChunk]}\n", []string{"command: required with transport: exec"}},
		{"exec with http settings", "  - {name: e, transport: exec, command: [x], url: \"http://x/\", hooks: [onChunk]}\n", []string{"url and secret: http settings"}},
		{"no hooks", "  - {name: e, transport: exec, command: [x]}\n", []string{"hooks: subscribe to at least one of beforeTurn"}},
		{"beforeStep", "  - {name: e, transport: exec, command: [x], hooks: [beforeStep]}\n", []string{"beforeStep is not dispatched to extensions"}},
		{"unknown hook", "  - {name: e, transport: exec, command: [x], hooks: [onChatResponse]}\n", []string{`unknown hook "onChatResponse"`}},
		{"hook twice", "  - {name: e, transport: exec, command: [x], hooks: [onChunk, onChunk]}\n", []string{"onChunk is listed twice"}},
		{"negative timeout", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], timeout: -1s}\n", []string{"timeout: must be positive"}},
		{"negative queue", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], queueSize: -1}\n", []string{"queueSize: must be positive"}},
		{"unknown agent", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], agents: [ghost]}\n", []string{`agents: unknown agent "ghost"`}},
		{"misspelt key", "  - {name: e, transport: exec, command: [x], hook: [onChunk]}\n", []string{`line 5 col 46: extensions[0]: unknown key "hook" (did you mean "hooks"?)`}},
		{"timeout without a unit", "  - {name: e, transport: exec, command: [x], hooks: [onChunk], timeout: 5}\n", []string{"line 5", "extensions[0].timeout must be a duration"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(extensionYAML(tc.ext)), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}
