package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
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
	if c.Listen != DefaultListen || c.Store.Path != "data/turngate.db" || c.Store.Synchronous != "full" || c.Rules.Dir != "rules" {
		t.Errorf("default config %+v", c)
	}
	a, ok := c.Agent("demo")
	if !ok || a.Model != "demo" || strings.Join(a.Tools, ",") != "weather,search,delete" {
		t.Errorf("demo agent %+v", a)
	}
	if c.Limits.MaxQueuedTurnsPerSession != DefaultMaxQueuedTurnsPerSession || c.Limits.TurnTimeout != DefaultTurnTimeout {
		t.Errorf("limits %+v", c.Limits)
	}
	if l := c.Limits; l.MaxConcurrentTools != 8 || l.ToolTimeout != time.Minute || l.MaxToolOutputBytes != 65536 {
		t.Errorf("tool limits %+v, want 8, 1m0s, 65536", l)
	}
}

func TestToolLimits(t *testing.T) {
	c, err := Parse("t.yaml", []byte("limits: {maxConcurrentTools: 2, toolTimeout: 5s, maxToolOutputBytes: 1024}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits; l.MaxConcurrentTools != 2 || l.ToolTimeout != 5*time.Second || l.MaxToolOutputBytes != 1024 {
		t.Errorf("tool limits %+v, want 2, 5s, 1024", l)
	}
}

// TestAttachmentMaxBytesDefault: an unset maxBytes fits the body limit, so
// a config that lowered limits.maxBodyBytes before file parts existed still
// loads; an agent that leaves it unset inherits the gateway's.
func TestAttachmentMaxBytesDefault(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int64
	}{
		{"limits: {}\n", DefaultAttachmentMaxBytes},
		{"limits: {maxBodyBytes: 2097152}\n", (2097152 - 65536) / 4 * 3},
		{"limits: {maxBodyBytes: 1000}\n", 500 / 4 * 3},
		{"limits: {maxBodyBytes: 2097152}\nagents:\n  - {name: a, model: m, attachments: {maxCount: 1}}\nproviders: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\n", (2097152 - 65536) / 4 * 3},
	} {
		c, err := Parse("t.yaml", []byte(tc.yaml), env(nil))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Limits.Attachments.MaxBytes; got != tc.want {
			t.Errorf("%q: maxBytes %d, want %d", tc.yaml, got, tc.want)
		}
		for i := range c.Agents {
			if got := c.AttachmentLimits(&c.Agents[i]).MaxBytes; got != tc.want {
				t.Errorf("%q: agent maxBytes %d, want %d", tc.yaml, got, tc.want)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "listen: x\nlisten2: y\n", []string{"line 2", "listen2"}},
		{"bad store synchronous", "store: {synchronous: \"off\"}\n", []string{"store.synchronous: must be full or normal, not \"off\""}},
		{"negative store timeout", "store: {timeout: -1s}\n", []string{"store.timeout: must be positive, not -1s"}},
		{"store timeout not a duration", "store: {timeout: soon}\n", []string{"store.timeout"}},
		{"unknown store driver", "store: {driver: mysql}\n", []string{"store.driver: must be sqlite or postgres, not \"mysql\""}},
		{"postgres without dsn", "store:\n  driver: postgres\n", []string{"line 2 col 3: store.dsn: required with store.driver: postgres"}},
		{"postgres with sqlite settings", "store:\n  driver: postgres\n  dsn: postgres://db/x\n  path: a.db\n  synchronous: full\n",
			[]string{"line 4 col 9: store.path: a SQLite setting", "line 5 col 16: store.synchronous: a SQLite setting"}},
		{"sqlite with a dsn", "store:\n  dsn: postgres://db/x\n", []string{"line 2 col 8: store.dsn: a PostgreSQL setting"}},
		{"dsn from a missing variable", "store:\n  driver: postgres\n  dsn: ${NOPE_DSN}\n", []string{"line 3 col 8: store.dsn", "NOPE_DSN is not set"}},
		{"unknown nested key", "agents:\n  - name: a\n    model: m\n    modle: m\n", []string{"line 4", "modle"}},
		{"unknown tool key", "tools:\n  - name: t\n    http: {url: http://x, verb: GET}\n", []string{"line 3", "verb"}},
		{"wrong type", "limits:\n  maxMessages: many\n", []string{"line 2"}},
		{"missing env var", "providers:\n  - name: p\n    type: openai\n    apiKey: ${NOPE_KEY}\n", []string{"line 4 col 13: providers[0].apiKey", "NOPE_KEY is not set"}},
		{"bad provider type", "providers:\n  - name: p\n    type: llama\n", []string{"type must be"}},
		{"unknown alias", "agents:\n  - name: a\n    model: ghost\n", []string{"line 3 col 12: agents[0] (a): unknown model alias \"ghost\""}},
		{"unknown tool", "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents:\n  - {name: a, model: m, tools: [nope]}\n", []string{"unknown tool \"nope\""}},
		{"key and hash", "auth:\n  apiKeys:\n    - {key: k, keySha256: abc, tenant: t}\n", []string{"exactly one of key and keySha256"}},
		{"file sink without path", "audit: {sink: file}\n", []string{"audit.path"}},
		{"tool choice of an unknown form", agentYAML("toolChoice: sometimes"), []string{`line 5 col 18: agents[0].toolChoice: tool choice "sometimes" is not one of`}},
		{"tool choice object without a name", agentYAML("toolChoice: {type: tool}"), []string{`line 5 col 18: agents[0].toolChoice: tool choice {"type":"tool"} needs a non-empty toolName`}},
		{"tool choice of a foreign tool", agentYAML("toolChoice: {type: tool, toolName: x}"), []string{`line 5 col 41: agents[0] (a): toolChoice: "x" is not one of`}},
		{"active tool of a foreign tool", agentYAML("activeTools: [t, x]"), []string{`line 5 col 23: agents[0] (a): activeTools: "x" is not one of`}},
		{"zero topK", agentYAML("topK: 0"), []string{"line 5 col 12: agents[0] (a): topK must be at least 1"}},
		{"negative timeout", agentYAML("timeout: {chunk: -1s}"), []string{"line 5 col 23: agents[0] (a): timeout.chunk: must not be negative, not -1s"}},
		{"negative maxConcurrentTools", "limits: {maxConcurrentTools: -1}\n", []string{"limits.maxConcurrentTools: must be positive, not -1"}},
		{"negative toolTimeout", "limits: {toolTimeout: -2s}\n", []string{"limits.toolTimeout: must be positive, not -2s"}},
		{"negative maxToolOutputBytes", "limits: {maxToolOutputBytes: -5}\n", []string{"limits.maxToolOutputBytes: must be positive, not -5"}},
		{"negative attachment maxBytes", "limits: {attachments: {maxBytes: -1}}\n", []string{"line 1 col 34: limits.attachments.maxBytes: must not be negative, not -1"}},
		{"negative attachment maxCount", "limits:\n  attachments:\n    maxCount: -2\n", []string{"line 3 col 15: limits.attachments.maxCount: must not be negative"}},
		{"negative attachment fetchTimeout", "limits:\n  attachments:\n    fetchRemote: true\n    fetchTimeout: -1s\n", []string{"line 4 col 19: limits.attachments.fetchTimeout: must be positive, not -1s"}},
		{"attachment fetchRemote not a bool", "limits: {attachments: {fetchRemote: sometimes}}\n", []string{"line 1"}},
		{"bad media type pattern", "limits:\n  attachments:\n    allowedMediaTypes: [image/png, 'image', '*/*', Image/PNG]\n", []string{
			`line 3 col 36: limits.attachments.allowedMediaTypes[1]: "image" is not a media type`,
			`line 3 col 45: limits.attachments.allowedMediaTypes[2]: "*/*" is not a media type`,
			`line 3 col 52: limits.attachments.allowedMediaTypes[3]: "Image/PNG" must be lower-case`}},
		{"attachment larger than the body", "limits: {maxBodyBytes: 1000000, attachments: {maxBytes: 1000000}}\n", []string{
			"limits.attachments.maxBytes: a file of 1000000 bytes is 1333336 bytes in base64, more than limits.maxBodyBytes (1000000) allows", "raise limits.maxBodyBytes to at least 1398872"}},
		{"agent attachment larger than the body", agentYAML("attachments: {maxBytes: 8000000}"), []string{"line 5 col 30: agents[0] (a): attachments.maxBytes: a file of 8000000 bytes"}},
		{"unknown attachment key", agentYAML("attachments: {maxbytes: 1}"), []string{`unknown key "maxbytes"`, `did you mean "maxBytes"`}},
		{"tool timeout without a unit", "limits: {toolTimeout: fast}\n", []string{"line 1"}},
		{"unknown timeout key", agentYAML("timeout: {totalMs: 5}"), []string{"line 5", "totalMs"}},
		{"duplicate agent", "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}, {name: a, model: m}]\n", []string{"line 3 col 38: agents[1]: duplicate agent"}},
		// Keys and values in YAML terms: line, column, field path, the
		// closest known key; never a Go type.
		{"misspelt agent key", "agents:\n  - name: a\n    maxStep: 3\n",
			[]string{`line 3 col 5: agents[0]: unknown key "maxStep" (did you mean "maxSteps"?)`}},
		{"misspelt top-level key", "limit: {maxMessages: 3}\n",
			[]string{`line 1 col 1: top level: unknown key "limit" (did you mean "limits"?)`}},
		{"wrong case", "store: {Path: x.db}\n", []string{`store: unknown key "Path" (did you mean "path"?)`}},
		{"inline tool fields", "tools:\n  - name: t\n    inputSchem: {}\n", []string{`tools[0]: unknown key "inputSchem" (did you mean "inputSchema"?)`}},
		{"nested runner block", "tools:\n  - name: t\n    http: {url: http://x, verb: GET}\n", []string{`line 3 col 27: tools[0].http: unknown key "verb"`}},
		{"mcp server key", "mcpServers:\n  - {name: fs, transport: stdio, comand: x}\n", []string{`mcpServers[0]: unknown key "comand" (did you mean "command"?)`}},
		{"nothing close", "agents:\n  - name: a\n    flavour: mint\n", []string{`agents[0]: unknown key "flavour"`}},
		{"every unknown key at once", "listen2: x\nagents:\n  - {name: a, modle: m}\n", []string{`line 1 col 1: top level: unknown key "listen2"`, `line 3 col 15: agents[0]: unknown key "modle" (did you mean "model"?)`}},
		{"duration", "limits:\n  toolTimeout: fast\n", []string{`line 2 col 16: limits.toolTimeout must be a duration such as 30s or 1m30s, not "fast"`}},
		{"integer", "limits:\n  maxMessages: many\n", []string{`line 2 col 16: limits.maxMessages must be a whole number, not "many"`}},
		{"bool", "rules: {watch: sometimes}\n", []string{`rules.watch must be true or false, not "sometimes"`}},
		{"enabled without endpoint", "tracing:\n  enabled: true\n", []string{"line 2 col 3: tracing.endpoint: no endpoint"}},
		{"endpoint scheme", "tracing:\n  enabled: true\n  endpoint: grpc://collector:4317\n", []string{"line 3 col 13: tracing.endpoint:", "scheme must be http or https"}},
		{"endpoint without host", "tracing: {enabled: true, endpoint: \"http:///v1/traces\"}\n", []string{"tracing.endpoint:", "no host"}},
		{"endpoint with credentials", "tracing: {enabled: true, endpoint: \"http://u:p@collector:4318\"}\n", []string{"tracing.endpoint:", "send credentials in tracing.headers"}},
		{"ratio above one", "tracing:\n  sampleRatio: 1.5\n", []string{"line 2 col 16: tracing.sampleRatio: must be between 0 and 1, not 1.5"}},
		{"negative ratio", "tracing: {sampleRatio: -0.1}\n", []string{"tracing.sampleRatio: must be between 0 and 1"}},
		{"ratio not a number", "tracing:\n  sampleRatio: half\n", []string{"line 2 col 16: tracing.sampleRatio"}},
		{"bad header name", "tracing:\n  headers: {\"bad header\": x}\n", []string{`line 2 col 13: tracing.headers["bad header"]: not a valid HTTP header name`}},
		{"header value with a newline", "tracing:\n  headers: {X-Token: \"a\\nb\"}\n", []string{"line 2 col 22: tracing.headers.X-Token: the value contains a control character"}},
		{"misspelt key", "tracing:\n  endpiont: http://x\n", []string{`line 2 col 3: tracing: unknown key "endpiont" (did you mean "endpoint"?)`}},
		{"bad indent deep in a list", "agents:\n  - name: a\n    model: m\n  - name: b\n    model: m\n   tools: [t]\n",
			[]string{`line 6 col 4: invalid YAML: this line's indentation lines up with neither the list's items nor their keys`, `(did not find expected '-' indicator)`}},
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
			for _, goWord := range []string{"config.", "not found in type", "unmarshal", "!!str", "time.Duration", ": yaml: "} {
				if strings.Contains(err.Error(), goWord) {
					t.Errorf("error %q speaks Go (%q)", err, goWord)
				}
			}
		})
	}
}

// agentYAML is a valid config whose one agent (line 4, tool t) has the
// extra line 5.
func agentYAML(extra string) string {
	return "tools: [{name: t, builtin: echo}]\nproviders: [{name: p, type: scripted}]\n" +
		"agents:\n  - {name: a, model: m, tools: [t],\n     " + extra + "}\nmodels: {m: {provider: p, model: x}}\n"
}

func TestAgentTurnDefaults(t *testing.T) {
	c, err := Parse("t.yaml", []byte(`
providers: [{name: p, type: scripted}]
models: {m: {provider: p, model: x}}
tools: [{name: a, builtin: echo}, {name: b, builtin: echo}]
agents:
  - name: full
    model: m
    tools: [a, b]
    maxSteps: 3
    activeTools: [a]
    toolChoice: {type: tool, toolName: a}
    temperature: 0.5
    topP: 0.9
    topK: 40
    presencePenalty: 0.1
    frequencyPenalty: 0.2
    stopSequences: [END]
    seed: 7
    maxOutputTokens: 256
    sendReasoning: false
    maxRetries: 1
    timeout: {total: 90s, chunk: 1500ms}
    headers: {X-Team: "${TEAM}"}
    providerOptions: {p: {reasoning_effort: low, n: [1, 2]}}
  - {name: bare, model: m, toolChoice: required}
`), env(map[string]string{"TEAM": "support"}))
	if err != nil {
		t.Fatal(err)
	}
	full, _ := c.Agent("full")
	want := engine.TurnConfig{
		MaxSteps: new(3), ActiveTools: &[]string{"a"}, ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "a"},
		Temperature: new(0.5), TopP: new(0.9), TopK: new(40), PresencePenalty: new(0.1), FrequencyPenalty: new(0.2),
		StopSequences: &[]string{"END"}, Seed: new(int64(7)), MaxOutputTokens: new(256), SendReasoning: new(false),
		MaxRetries: new(1), Timeout: &engine.TimeoutConfig{TotalMs: 90000, ChunkMs: 1500},
		Headers:         map[string]string{"X-Team": "support"},
		ProviderOptions: map[string]any{"p": map[string]any{"reasoning_effort": "low", "n": []any{1, 2}}},
	}
	if got := full.TurnDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("TurnDefaults()\n got %s\nwant %s", mustJSON(t, got), mustJSON(t, want))
	}
	bare, _ := c.Agent("bare")
	if got := bare.TurnDefaults(); !reflect.DeepEqual(got, engine.TurnConfig{ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceRequired}}) {
		t.Errorf("bare agent's defaults %s, want only the tool choice", mustJSON(t, got))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
	c, err := Parse("t.yaml", []byte(yaml), env(map[string]string{"KEY": "sk-1", "ORG": "acme", "GATEWAY_KEY": "b9e3d2c7a1f04e68d5c3b2a19f7e6d40"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers[0]
	if p.APIKey != "sk-1" || p.BaseURL != "http://localhost:11434/v1" || p.Headers["X-Org"] != "org-acme" || p.Headers["X-Cost"] != "$5" {
		t.Errorf("expanded provider %+v", p)
	}
	// The key is kept only as its SHA-256 (of "b9e3…6d40").
	if k := c.Auth.APIKeys[0]; k.Key != "" || k.KeySHA256 != "dc19fb01534c336704df2725442b5b223f7b1804c2dffca43519b3d8f08b7f7a" {
		t.Errorf("parsed API key %+v, want only the hash", k)
	}
	if c.Limits.TurnTimeout != 90*time.Second {
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

// maxFuzzConfig bounds the inputs FuzzParse explores. Go's fuzzer
// minimizes every input that finds new coverage by trying to remove each
// byte range, which is quadratic in the input's size: seeded with whole
// 1.5 KB config files, it spent seconds (up to -fuzzminimizetime, 60s) per
// new input and ran a few hundred execs in 15s. Whole files are covered by
// TestDefault, TestREADMEConfig and the gateway's tests; the fuzzer gets
// them as sections.
const maxFuzzConfig = 512

// sections splits a config document into its top-level sections, and a
// section longer than maxFuzzConfig into its list items, each under the
// section's key.
func sections(data []byte) [][]byte {
	var out [][]byte
	starts := topLevelKey.FindAllIndex(data, -1)
	for i, st := range starts {
		end := len(data)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		sec := data[st[0]:end]
		if len(sec) <= maxFuzzConfig {
			out = append(out, sec)
			continue
		}
		head, body, _ := bytes.Cut(sec, []byte("\n"))
		for _, item := range bytes.Split(body, []byte("\n  - ")) {
			out = append(out, fmt.Appendf(nil, "%s\n  - %s\n", head, bytes.TrimPrefix(item, []byte("  - "))))
		}
	}
	return out
}

// topLevelKey matches the start of a top-level key's line.
var topLevelKey = regexp.MustCompile(`(?m)^[A-Za-z]`)

// fuzzPositioned matches a line of a report of FuzzParse's.
var fuzzPositioned = regexp.MustCompile(`^fuzz\.yaml: line [1-9]\d* col [1-9]\d*: `)

// FuzzParse checks that no config text panics the decoder, the expansion
// or the validation, or takes the decoder long, and that every error is
// positioned: each line of a report starts with the file, line and column
// (a message of several lines goes on indented). Seeded with the sections
// of the embedded default, the examples' and deploy's configs.
func FuzzParse(f *testing.F) {
	f.Add([]byte("listen: x"))
	f.Add([]byte("agents: [{name: a, model: ${X:-m}}]\nlimits: {turnTimeout: 1s}\n"))
	f.Add([]byte("providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\n" +
		"agents: [{name: a, model: m, toolChoice: {type: tool, toolName: t}, timeout: {total: 1s}}]\n"))
	seeds := [][]byte{DefaultYAML()}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "turngate.yaml"))
	files = append(files, filepath.Join("..", "testdata", "config.yaml"), filepath.Join("..", "..", "deploy", "turngate.yaml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			seeds = append(seeds, data)
		}
	}
	for _, s := range seeds {
		for _, sec := range sections(s) {
			f.Add(sec)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzConfig {
			return
		}
		_, err := Parse("fuzz.yaml", data, env(map[string]string{"X": "y"}))
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !fuzzPositioned.MatchString(line) && !strings.HasPrefix(line, "    ") {
				t.Errorf("error without its file, line and column: %q\nin %q", line, err)
			}
		}
	})
}

func TestPostgresStore(t *testing.T) {
	yaml := "store:\n  driver: postgres\n  dsn: ${DATABASE_URL}\n"
	c, err := Parse("t.yaml", []byte(yaml), env(map[string]string{"DATABASE_URL": "postgres://gw:pw@db:5432/turngate"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Store{Driver: StorePostgres, DSN: "postgres://gw:pw@db:5432/turngate", Timeout: DefaultStoreTimeout}
	if c.Store != want {
		t.Errorf("store = %+v, want %+v (no SQLite defaults)", c.Store, want)
	}
}
