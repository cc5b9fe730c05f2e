package config

import (
	"strings"
	"testing"
)

// TestSessionErrors checks that every inconsistent session setting is an
// error naming its line and what to change.
func TestSessionErrors(t *testing.T) {
	head := "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents:\n  - name: a\n    model: m\n    session:\n"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no source", "      context:\n        - {name: soul}\n",
			[]string{"line 8 col 11: agents[0].session.context[0] (soul): set exactly one source: text, file, http or writable: true"}},
		{"two sources", "      context:\n        - {name: soul, text: hi, file: soul.md}\n", []string{"line 8 col 11: agents[0].session.context[0] (soul): set exactly one source"}},
		{"duplicate", "      context:\n        - {name: soul, text: a}\n        - {name: soul, text: b}\n",
			[]string{`line 9 col 18: agents[0].session.context[1]: duplicate context block "soul"`}},
		{"bad name", "      context:\n        - {name: \"my block\", text: a}\n", []string{`line 8 col 18: agents[0].session.context[0]: name must be a letter then up to 63 letters, digits, _ or -, not "my block"`}},
		{"writable without maxTokens", "      context:\n        - {name: memory, writable: true}\n",
			[]string{"line 8 col 11: agents[0].session.context[0] (memory): a writable block needs maxTokens of at least 1"}},
		{"maxTokens on text", "      context:\n        - {name: soul, text: a, maxTokens: 5}\n", []string{"line 8 col 44: agents[0].session.context[0] (soul): maxTokens bounds a writable block only"}},
		{"http url", "      context:\n        - name: g\n          http: {url: \"file:///etc/passwd\"}\n",
			[]string{"line 9 col 23: agents[0].session.context[0].http (g): url must be an http or https URL"}},
		{"compaction", "      compaction: {after: 0, model: ghost, keepLast: -1}\n",
			[]string{"line 7 col 27: agents[0].session.compaction: after must be", `line 7 col 37: agents[0].session.compaction: unknown model alias "ghost"`, "line 7 col 54: agents[0].session.compaction: keepLast must be at least 1"}},
		{"unknown key", "      context:\n        - {name: soul, txt: a}\n", []string{"line 8", `unknown key "txt" (did you mean "text"?)`}},
		{"typo in compaction", "      compaction: {afterr: 10}\n", []string{"line 7", `"afterr"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(head+tc.yaml), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestSessionDefaults checks the defaults and that a file block's path is
// the config file's directory's.
func TestSessionDefaults(t *testing.T) {
	c, err := Parse("test.yaml", []byte(`providers: [{name: p, type: scripted}]
models: {m: {provider: p, model: x}}
agents:
  - name: a
    model: m
    session:
      context:
        - {name: rules, file: rules.md}
        - {name: g, http: {url: "https://example.com/g"}}
      compaction: {after: 100}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.resolvePaths("/etc/turngate")
	s := c.Agents[0].Session
	if s.Context[0].File != "/etc/turngate/rules.md" || s.Context[1].HTTP.Timeout != DefaultHTTPBlockTimeout || s.Context[1].HTTP.CacheTTL != DefaultHTTPBlockCacheTTL {
		t.Errorf("context %+v %+v", s.Context[0], s.Context[1].HTTP)
	}
	if cp := s.Compaction; cp.Model != "m" || cp.KeepLast != DefaultKeepLast || cp.Prompt != DefaultCompactionPrompt || !cp.IsReactive() {
		t.Errorf("compaction %+v", cp)
	}
}
