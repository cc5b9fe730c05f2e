package config

import (
	"os"
	"path/filepath"
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

// TestContextFiles: Load checks each file block's file as the turns will
// read it (a relative path against the config's directory) and reports
// each one they could not read at its line and column, with the other
// errors; Parse, which has no directory, does not look.
func TestContextFiles(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int64{"rules.md": 12, "full.md": MaxSourceBytes, "big.md": MaxSourceBytes + 1} {
		// Sparse files: the size is what is checked, not the content.
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, name), size); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	const head = "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents:\n  - name: a\n    model: m\n    session:\n      context:\n"
	for _, tc := range []struct {
		name, blocks, want string // want "" loads
	}{
		{"relative path", "        - {name: rules, file: rules.md}\n", ""},
		{"absolute path", "        - {name: rules, file: " + filepath.Join(dir, "rules.md") + "}\n", ""},
		{"at the bound", "        - {name: rules, file: full.md}\n", ""},
		{"missing", "        - name: rules\n          file: missing.md\n",
			"line 9 col 17: agents[0].session.context[0] (rules): file: open " + filepath.Join(dir, "missing.md") + ": no such file or directory"},
		{"a directory", "        - name: rules\n          file: notes\n",
			"line 9 col 17: agents[0].session.context[0] (rules): file: " + filepath.Join(dir, "notes") + " is a directory"},
		{"over the bound", "        - name: rules\n          file: big.md\n",
			"line 9 col 17: agents[0].session.context[0] (rules): file: " + filepath.Join(dir, "big.md") + " is 1048577 bytes, over the 1048576 a block may hold"},
		{"with the other errors", "        - {name: soul, text: hi, maxTokens: 3}\n        - {name: rules, file: nope/rules.md}\n",
			"line 8 col 45: agents[0].session.context[0] (soul): maxTokens bounds a writable block only\n" + filepath.Join(dir, "turngate.yaml") +
				": line 9 col 31: agents[0].session.context[1] (rules): file: open " + filepath.Join(dir, "nope", "rules.md") + ": no such file or directory"},
		{"unset variable", "        - name: rules\n          file: ${NOPE_RULES}\n",
			"line 9 col 17: agents[0].session.context[0].file: environment variable NOPE_RULES is not set (use ${NOPE_RULES:-default} for a default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "turngate.yaml")
			data := head + tc.blocks
			if !checkLoad(t, path, data, tc.want) {
				return
			}
			if _, err := Parse(path, []byte(data), env(map[string]string{"NOPE_RULES": "x.md"})); err != nil && strings.Contains(err.Error(), "): file: ") {
				t.Errorf("Parse looked for the file: %v", err)
			}
		})
	}
}
