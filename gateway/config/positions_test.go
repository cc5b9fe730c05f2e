package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// pm is a provider and a model alias m (lines 1 and 2) for the configs of
// TestErrorPositions.
const pm = "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\n"

// laughs is a "billion laughs" document: ten aliases of ten aliases of…
// of a list, under unknown keys, the last used as agents. Its report comes
// at once (each anchor is walked once) with each error once.
var laughs = func() string {
	var b strings.Builder
	b.WriteString("x0: &a0 [{name: a, model: m, modle: m}]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	return b.String() + "agents: *a8\n"
}()

// TestErrorPositions: every kind of config error, one bad config each, is
// reported at the line and column of the value it is about (of the key for
// an unknown or repeated key, of the enclosing mapping for a missing key),
// in the exact words a user reads.
func TestErrorPositions(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		// YAML syntax.
		{"bad indent", "agents:\n  - name: a\n   model: m\n", `turngate.yaml: line 3 col 4: invalid YAML: this line's indentation lines up with neither the list's items nor their keys: an item starts with "- " under the list's other items, and its keys line up after the "- " (did not find expected '-' indicator)`},
		{"over-indented key", "agents:\n  - name: a\n    model: m\n      tools: [x]\n", `turngate.yaml: line 4 col 7: invalid YAML: "tools" is indented deeper than "model" on the line above (column 7, not 5), so YAML reads it as more of "model"'s value, where a key cannot start: indent it as far as the keys it belongs with (mapping values are not allowed in this context)`},
		{"tab indent", "limits:\n\tmaxMessages: 3\n", `turngate.yaml: line 2 col 1: invalid YAML: found character that cannot start any token`},
		{"control character", "listen: x\nagents: [{name: \"a\x01\"}]\n", `turngate.yaml: line 2 col 19: invalid YAML: control characters are not allowed`},
		{"alias of no anchor", "listen: x\nagents: [*nope]\n", `turngate.yaml: line 2 col 10: invalid YAML: unknown anchor 'nope' referenced`},
		// Keys and types.
		{"unknown key", pm + "agents:\n  - {name: a, model: m, maxStep: 3}\n", `turngate.yaml: line 4 col 25: agents[0]: unknown key "maxStep" (did you mean "maxSteps"?)`},
		{"key twice in a block", pm + "agents:\n  - name: a\n    model: m\n    name: b\n", `turngate.yaml: line 6 col 5: agents[0]: key "name" is set twice (first at line 4)`},
		{"alias twice", "providers: [{name: p, type: scripted}]\nmodels:\n  m: {provider: p, model: x}\n  m: {provider: p, model: y}\n", `turngate.yaml: line 4 col 3: models: key "m" is set twice (first at line 3)`},
		{"aliases of aliases", laughs, "turngate.yaml: line 1 col 1: top level: unknown key \"x0\"\nturngate.yaml: line 2 col 1: top level: unknown key \"x1\"\nturngate.yaml: line 3 col 1: top level: unknown key \"x2\"\nturngate.yaml: line 4 col 1: top level: unknown key \"x3\"\nturngate.yaml: line 5 col 1: top level: unknown key \"x4\"\nturngate.yaml: line 6 col 1: top level: unknown key \"x5\"\nturngate.yaml: line 7 col 1: top level: unknown key \"x6\"\nturngate.yaml: line 8 col 1: top level: unknown key \"x7\"\nturngate.yaml: line 8 col 5: agents[0] must be a mapping, not a list\nturngate.yaml: line 9 col 1: top level: unknown key \"x8\""},
		{"unknown key in an anchor used twice", pm + "agents:\n  - &a {name: a, model: m, modle: m}\n  - *a\n", `turngate.yaml: line 4 col 28: agents[0]: unknown key "modle" (did you mean "model"?)`},
		{"number of words", "limits:\n  maxMessages: many\n", `turngate.yaml: line 2 col 16: limits.maxMessages must be a whole number, not "many"`},
		{"long value", "limits:\n  maxMessages: a-great-many-messages\n", `turngate.yaml: line 2 col 16: limits.maxMessages must be a whole number, not "a-great-many-messages"`},
		{"mapping for a number", "limits:\n  maxMessages: {a: 1}\n", `turngate.yaml: line 2 col 16: limits.maxMessages must be a whole number, not a mapping`},
		{"list for a string", "listen: [a, b]\n", `turngate.yaml: line 1 col 9: listen must be a string, not a list`},
		{"string for a list", pm + "agents: a\n", `turngate.yaml: line 3 col 9: agents must be a list, not "a"`},
		{"string for an agent", pm + "agents: [a]\n", `turngate.yaml: line 3 col 10: agents[0] must be a mapping, not "a"`},
		{"not a mapping", "just words\n", `turngate.yaml: line 1 col 1: the config must be a mapping, not "just words"`},
		{"tool choice", pm + "agents:\n  - {name: a, model: m, toolChoice: sometimes}\n", `turngate.yaml: line 4 col 37: agents[0].toolChoice: tool choice "sometimes" is not one of auto, none, required or {"type":"tool","toolName":…}`},
		{"tool choice without a name", pm + "agents:\n  - {name: a, model: m, toolChoice: {type: tool}}\n", `turngate.yaml: line 4 col 37: agents[0].toolChoice: tool choice {"type":"tool"} needs a non-empty toolName`},
		{"mcp tool selection", "mcpServers:\n  - {name: fs, transport: stdio, command: x, tools: all}\n", `turngate.yaml: line 2 col 53: mcpServers[0].tools: tools must be a list of tool names or a mapping from exposed name to server tool name`},
		{"keys and types at once", "limits:\n  maxMessages: many\n  maxMesages: 3\n", "turngate.yaml: line 2 col 16: limits.maxMessages must be a whole number, not \"many\"\nturngate.yaml: line 3 col 3: limits: unknown key \"maxMesages\" (did you mean \"maxMessages\"?)"},
		// Retention.
		{"retention of no unit", pm + "agents:\n  - {name: a, model: m, retention: 30x}\n", "turngate.yaml: line 4 col 36: agents[0] (a): retention: \"30x\" is not a retention: write a whole number of days such as 30d, or a duration such as 36h"},
		{"retention too short", pm + "agents:\n  - {name: a, model: m, retention: 5m}\n", "turngate.yaml: line 4 col 36: agents[0] (a): retention: \"5m\" is shorter than an hour, the shortest retention"},
		{"approval webhook of an unknown tenant", "approvalWebhooks:\n  - {url: \"https://x.example/\", secret: 0123456789abcdef, tenants: [default, defualt]}\n",
			"turngate.yaml: line 2 col 78: approvalWebhooks[0].tenants: \"defualt\" is not a configured tenant (one of an API key or of auth.jwt.tenants) (did you mean \"default\"?)"},
		{"retention of an unknown tenant", "retention:\n  tenants: {defualt: 30d}\n", "turngate.yaml: line 2 col 22: retention.tenants.defualt: \"defualt\" is not a configured tenant (one of an API key or of auth.jwt.tenants) (did you mean \"default\"?)"},
		{"retention of a tenant", "retention:\n  tenants: {default: 0d}\n", "turngate.yaml: line 2 col 22: retention.tenants.default: \"0d\" is not a retention: write a whole number of days such as 30d, or a duration such as 36h"},
		{"retention key", "retention:\n  tenant: {default: 30d}\n", "turngate.yaml: line 2 col 3: retention: unknown key \"tenant\" (did you mean \"tenants\"?)"},
		// ${VAR} expansion.
		{"unset variables", "providers:\n  - {name: p, type: openai, apiKey: \"${NOPE_A}\", baseURL: \"${NOPE_B}\"}\n", "turngate.yaml: line 2 col 37: providers[0].apiKey: environment variable NOPE_A is not set (use ${NOPE_A:-default} for a default)\nturngate.yaml: line 2 col 59: providers[0].baseURL: environment variable NOPE_B is not set (use ${NOPE_B:-default} for a default)"},
		{"invalid variable name", "listen: \"${1X}\"\n", `turngate.yaml: line 1 col 9: listen: invalid environment variable name "1X"`},
		{"unset variable in a url", extensionYAML("  - {name: e, transport: http, url: \"${NOPE_URL}\", secret: 0123456789abcdef, hooks: [onChunk]}\n"), `turngate.yaml: line 5 col 37: extensions[0].url: environment variable NOPE_URL is not set (use ${NOPE_URL:-default} for a default)`},
		// Providers and models.
		{"provider without a name", "providers: [{type: scripted}]\n", `turngate.yaml: line 1 col 13: providers[0]: name is required`},
		{"provider twice", "providers:\n  - {name: p, type: scripted}\n  - {name: p, type: scripted}\n", `turngate.yaml: line 3 col 12: providers[1]: duplicate provider "p"`},
		{"provider type", "providers:\n  - {name: p, type: llama}\n", `turngate.yaml: line 2 col 21: providers[0] (p): type must be openai, anthropic or scripted, not "llama"`},
		{"provider without a key", "providers:\n  - name: p\n    type: openai\n", `turngate.yaml: line 2 col 5: providers[0] (p): apiKey is empty: the openai API needs one (e.g. apiKey: ${OPENAI_API_KEY}); set baseURL for a server that takes none`},
		{"provider name with a slash", "providers:\n  - {name: a/b, type: scripted}\n", `turngate.yaml: line 2 col 12: providers[0]: name "a/b" must not contain a slash (a model may be named provider/model)`},
		{"alias of a provider's model", "providers: [{name: p, type: scripted}]\nmodels:\n  m: {provider: p, model: x}\n  p/x: {provider: p, model: y}\n", `turngate.yaml: line 4 col 3: models["p/x"]: "p/x" already names model "x" of provider "p"; an alias must not hide it`},
		{"model of no provider", "models:\n  fast: {provider: ghost, model: x}\n", `turngate.yaml: line 2 col 20: models.fast: unknown provider "ghost"`},
		{"model without its id", pm[:len(pm)-len("models: {m: {provider: p, model: x}}\n")] + "models:\n  gpt-4.1: {provider: p}\n", `turngate.yaml: line 3 col 12: models["gpt-4.1"]: model is required`},
		// MCP servers.
		{"mcp server url", "mcpServers:\n  - {name: fs, transport: http, url: /mcp}\n", `turngate.yaml: line 2 col 38: mcpServers[0] (fs): url: must be an http or https URL with a host`},
		{"mcp server without command", "mcpServers:\n  - name: fs\n    transport: stdio\n", `turngate.yaml: line 2 col 5: mcpServers[0] (fs): command: required for transport stdio`},
		{"mcp server transport", "mcpServers:\n  - {name: fs, transport: grpc}\n", `turngate.yaml: line 2 col 27: mcpServers[0] (fs): transport "grpc": must be "http" or "stdio"`},
		{"mcp server twice", "mcpServers:\n  - {name: fs, transport: stdio, command: x}\n  - {name: fs, transport: stdio, command: y}\n", `turngate.yaml: line 3 col 12: mcpServers[1]: duplicate MCP server "fs"`},
		// Tools.
		{"tool twice", "tools:\n  - {name: t, builtin: echo}\n  - {name: t, builtin: echo}\n", `turngate.yaml: line 3 col 12: tools[1]: duplicate tool "t"`},
		{"builtin and a runner", "tools:\n  - {name: t, builtin: echo, http: {url: \"http://x/\"}}\n", `turngate.yaml: line 2 col 24: tools[0] (t): builtin and a runner block are exclusive`},
		{"tool schema", "tools:\n  - name: t\n    builtin: echo\n    inputSchema: {type: objekt}\n", "turngate.yaml: line 4 col 25: tools[0] (t): inputSchema: compiling schema: \"turngate:///schema.json#\" is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#'\n    - at '': 'allOf' failed\n      - at '/type': 'anyOf' failed\n        - at '/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'\n        - at '/type': got string, want array"},
		// Agents.
		{"agent without a name", pm + "agents:\n  - {model: m}\n", `turngate.yaml: line 4 col 5: agents[0]: name is required`},
		{"agent twice", pm + "agents:\n  - {name: a, model: m}\n  - {name: a, model: m}\n", `turngate.yaml: line 5 col 12: agents[1]: duplicate agent "a"`},
		{"unknown model", pm + "agents:\n  - {name: a, model: ghost}\n", `turngate.yaml: line 4 col 22: agents[0] (a): unknown model alias "ghost"`},
		{"unknown tool", pm + "agents:\n  - {name: a, model: m, tools: [nope]}\n", `turngate.yaml: line 4 col 33: agents[0] (a): unknown tool "nope"`},
		{"negative maxSteps", pm + "agents:\n  - {name: a, model: m, maxSteps: -1}\n", `turngate.yaml: line 4 col 35: agents[0] (a): maxSteps must not be negative`},
		{"active tool of a foreign tool", pm + "agents:\n  - {name: a, model: m, activeTools: [x]}\n", `turngate.yaml: line 4 col 39: agents[0] (a): activeTools: "x" is not one of the agent's tools`},
		{"tool choice of a foreign tool", pm + "agents:\n  - {name: a, model: m, toolChoice: {type: tool, toolName: x}}\n", `turngate.yaml: line 4 col 60: agents[0] (a): toolChoice: "x" is not one of the agent's tools`},
		{"topK", pm + "agents:\n  - {name: a, model: m, topK: 0}\n", `turngate.yaml: line 4 col 31: agents[0] (a): topK must be at least 1`},
		{"maxOutputTokens", pm + "agents:\n  - {name: a, model: m, maxOutputTokens: 0}\n", `turngate.yaml: line 4 col 42: agents[0] (a): maxOutputTokens must be at least 1`},
		{"maxRetries", pm + "agents:\n  - {name: a, model: m, maxRetries: -1}\n", `turngate.yaml: line 4 col 37: agents[0] (a): maxRetries must not be negative`},
		{"negative timeout", pm + "agents:\n  - name: a\n    model: m\n    timeout: {total: -1s}\n", `turngate.yaml: line 6 col 22: agents[0] (a): timeout.total: must not be negative, not -1s`},
		{"provider options", pm + "agents:\n  - {name: a, model: m, providerOptions: {openai: {x: .inf}}}\n", `turngate.yaml: line 4 col 42: agents[0] (a): providerOptions: not representable as JSON: json: unsupported value: +Inf`},
		{"body schema", pm + "agents:\n  - {name: a, model: m, bodySchema: {type: 3}}\n", "turngate.yaml: line 4 col 44: agents[0] (a): bodySchema: compiling schema: \"turngate:///schema.json#\" is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#'\n    - at '': 'allOf' failed\n      - at '/type': 'anyOf' failed\n        - at '/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'\n        - at '/type': got number, want array"},
		{"nested body schema", pm + "agents:\n  - name: a\n    model: m\n    bodySchema:\n      type: object\n      properties:\n        n: {type: numbr}\n", "turngate.yaml: line 9 col 19: agents[0] (a): bodySchema: compiling schema: \"turngate:///schema.json#\" is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#'\n    - at '': 'allOf' failed\n      - at '/properties/n': 'allOf' failed\n        - at '/properties/n/type': 'anyOf' failed\n          - at '/properties/n/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'\n          - at '/properties/n/type': got string, want array"},
		{"agent attachments", pm + "agents:\n  - name: a\n    model: m\n    attachments: {maxCount: -1}\n", `turngate.yaml: line 6 col 29: agents[0] (a): attachments.maxCount: must not be negative, not -1`},
		// Quotas.
		{"quota without a limit", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: tenant, window: day}\n", `turngate.yaml: line 5 col 5: quotas[0] (q): set exactly one of turns, inputTokens and outputTokens (the limit), not 0`},
		{"quota per a typo", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: tennant, turns: 3, window: 1m}\n", `turngate.yaml: line 5 col 20: quotas[0] (q): per: "tennant" is not tenant, principal or agent (did you mean "tenant"?)`},
		{"quota window", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: principal, turns: 3, window: dya}\n", `turngate.yaml: line 5 col 49: quotas[0] (q): window "dya" is not hour, day, month or a duration such as 1m (did you mean "day"?)`},
		{"quota time zone", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: tenant, outputTokens: 9, window: day, timeZone: Mars/Olympus}\n", `turngate.yaml: line 5 col 68: quotas[0] (q): timeZone: "Mars/Olympus" is not an IANA time zone (Europe/Berlin, UTC)`},
		{"quota of no tenant", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: principal, tenant: acmee, turns: 3, window: 1h}\nauth:\n  apiKeys: [{keySha256: \"0000000000000000000000000000000000000000000000000000000000000000\", tenant: acme}]\n", `turngate.yaml: line 5 col 39: quotas[0] (q): no API key is of tenant "acmee" (did you mean "acme"?): the quota would limit no one`},
		{"quota of a tenant without keys", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: principal, tenant: acme, turns: 3, window: 1h}\n", `turngate.yaml: line 5 col 39: quotas[0] (q): no API key is of tenant "acme": the quota would limit no one`},
		{"quota of no agent", pm + "agents: [{name: a, model: m}]\nquotas:\n  - {name: q, per: tenant, agent: b, turns: 3, window: 1h}\n", `turngate.yaml: line 5 col 35: quotas[0] (q): unknown agent "b" (did you mean "a"?)`},
		// Sessions.
		{"block name", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context: [{name: \"my block\", text: x}]\n", `turngate.yaml: line 7 col 24: agents[0].session.context[0]: name must be a letter then up to 63 letters, digits, _ or -, not "my block"`},
		{"block twice", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - {name: b, text: x}\n        - {name: b, text: y}\n", `turngate.yaml: line 9 col 18: agents[0].session.context[1]: duplicate context block "b"`},
		{"block without a source", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - name: b\n", `turngate.yaml: line 8 col 11: agents[0].session.context[0] (b): set exactly one source: text, file, http or writable: true`},
		{"writable without maxTokens", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - {name: b, writable: true}\n", `turngate.yaml: line 8 col 11: agents[0].session.context[0] (b): a writable block needs maxTokens of at least 1`},
		{"maxTokens of a text", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - {name: b, text: x, maxTokens: 9}\n", `turngate.yaml: line 8 col 41: agents[0].session.context[0] (b): maxTokens bounds a writable block only`},
		{"block url", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - name: b\n          http: {url: \"file:///etc/passwd\"}\n", `turngate.yaml: line 9 col 23: agents[0].session.context[0].http (b): url must be an http or https URL, not "file:///etc/passwd"`},
		{"block timeout", pm + "agents:\n  - name: a\n    model: m\n    session:\n      context:\n        - name: b\n          http: {url: \"http://x/\", cacheTTL: -1s}\n", `turngate.yaml: line 9 col 46: agents[0].session.context[0].http.cacheTTL: must not be negative, not -1s`},
		{"compaction", pm + "agents:\n  - name: a\n    model: m\n    session:\n      compaction: {after: 0, model: ghost, keepLast: -1}\n", "turngate.yaml: line 7 col 27: agents[0].session.compaction: after must be a token count of at least 1\nturngate.yaml: line 7 col 37: agents[0].session.compaction: unknown model alias \"ghost\"\nturngate.yaml: line 7 col 54: agents[0].session.compaction: keepLast must be at least 1"},
		// Store, replica, auth, audit.
		{"store driver", "store:\n  driver: mysql\n", `turngate.yaml: line 2 col 11: store.driver: must be sqlite or postgres, not "mysql"`},
		{"store synchronous", "store:\n  synchronous: \"off\"\n", `turngate.yaml: line 2 col 16: store.synchronous: must be full or normal, not "off"`},
		{"sqlite dsn", "store:\n  dsn: postgres://db/x\n", `turngate.yaml: line 2 col 8: store.dsn: a PostgreSQL setting; set store.driver: postgres, or drop it`},
		{"postgres without dsn", "store:\n  driver: postgres\n", `turngate.yaml: line 2 col 3: store.dsn: required with store.driver: postgres (for example "${TURNGATE_DATABASE_URL}")`},
		{"postgres with sqlite settings", "store:\n  driver: postgres\n  dsn: postgres://db/x\n  path: a.db\n", `turngate.yaml: line 4 col 9: store.path: a SQLite setting; PostgreSQL takes store.dsn`},
		{"replica id", "replica:\n  id: \"-x\"\n", `turngate.yaml: line 2 col 7: replica.id: must be 1-128 characters of letters, digits and _ . : @ -, starting with a letter or digit, not "-x"`},
		{"lease", "replica:\n  leaseTtl: 10ms\n", `turngate.yaml: line 2 col 13: replica.leaseTtl: must be at least 1s, not 10ms`},
		{"key and hash", "auth:\n  apiKeys:\n    - {key: b9e3d2c7a1f04e68d5c3b2a19f7e6d40, keySha256: abc, tenant: t}\n", "turngate.yaml: line 3 col 7: auth.apiKeys[0]: set exactly one of key and keySha256\nturngate.yaml: line 3 col 58: auth.apiKeys[0]: keySha256 must be 64 hex digits"},
		{"neither key nor hash", "auth:\n  apiKeys:\n    - tenant: t\n", `turngate.yaml: line 3 col 7: auth.apiKeys[0]: set exactly one of key and keySha256`},
		{"no tenant", "auth:\n  apiKeys:\n    - key: b9e3d2c7a1f04e68d5c3b2a19f7e6d40\n", `turngate.yaml: line 3 col 7: auth.apiKeys[0]: tenant is required`},
		{"key twice", "auth:\n  apiKeys:\n    - {key: b9e3d2c7a1f04e68d5c3b2a19f7e6d40, tenant: a}\n    - {key: b9e3d2c7a1f04e68d5c3b2a19f7e6d40, tenant: b}\n", `turngate.yaml: line 4 col 13: auth.apiKeys[1]: the same key as auth.apiKeys[0] (tenant "a"): each key must map to one principal`},
		{"file sink without path", "audit:\n  sink: file\n", `turngate.yaml: line 2 col 3: audit.path: required for the file sink`},
		{"sink", "audit:\n  sink: syslog\n", `turngate.yaml: line 2 col 9: audit.sink: must be stdout, file or none, not "syslog"`},
		// Limits.
		{"negative limits", "limits:\n  maxBodyBytes: -1\n  turnTimeout: -1s\n  idleTimeout: -1s\n", "turngate.yaml: line 2 col 17: limits.maxBodyBytes: must not be negative, not -1\nturngate.yaml: line 3 col 16: limits.turnTimeout: must not be negative, not -1s\nturngate.yaml: line 4 col 16: limits.idleTimeout: must not be negative, not -1s"},
		{"approval expiry", "limits:\n  approvalExpiry: -1h\n", `turngate.yaml: line 2 col 19: limits.approvalExpiry: must be positive, not -1h0m0s`},
		{"concurrent tools", "limits:\n  maxConcurrentTools: -1\n", `turngate.yaml: line 2 col 23: limits.maxConcurrentTools: must be positive, not -1`},
		{"tool timeout", "limits:\n  toolTimeout: -1s\n", `turngate.yaml: line 2 col 16: limits.toolTimeout: must be positive, not -1s`},
		{"tool output", "limits:\n  maxToolOutputBytes: -1\n", `turngate.yaml: line 2 col 23: limits.maxToolOutputBytes: must be positive, not -1`},
		{"attachment size", "limits:\n  maxBodyBytes: 1000\n  attachments: {maxBytes: 1000}\n", `turngate.yaml: line 3 col 27: limits.attachments.maxBytes: a file of 1000 bytes is 1336 bytes in base64, more than limits.maxBodyBytes (1000) allows with 500 bytes for the rest of the message; raise limits.maxBodyBytes to at least 1836 or lower maxBytes`},
		{"media type", "limits:\n  attachments:\n    allowedMediaTypes: [image]\n", `turngate.yaml: line 3 col 25: limits.attachments.allowedMediaTypes[0]: "image" is not a media type (type/subtype or type/*)`},
		{"fetch timeout", "limits:\n  attachments:\n    fetchTimeout: -1s\n", `turngate.yaml: line 3 col 19: limits.attachments.fetchTimeout: must be positive, not -1s`},
		// Tracing and WebSocket.
		{"sample ratio", "tracing:\n  sampleRatio: 2\n", `turngate.yaml: line 2 col 16: tracing.sampleRatio: must be between 0 and 1, not 2`},
		{"header name", "tracing:\n  headers:\n    \"bad header\": x\n", `turngate.yaml: line 3 col 5: tracing.headers["bad header"]: not a valid HTTP header name`},
		{"header value", "tracing:\n  headers:\n    X-Token: \"a\\nb\"\n", `turngate.yaml: line 3 col 14: tracing.headers.X-Token: the value contains a control character`},
		{"no endpoint", "tracing:\n  enabled: true\n", `turngate.yaml: line 2 col 3: tracing.endpoint: no endpoint (an OTLP/HTTP URL such as http://localhost:4318)`},
		{"endpoint", "tracing:\n  enabled: true\n  endpoint: grpc://c:4317\n", `turngate.yaml: line 3 col 13: tracing.endpoint: endpoint "grpc://c:4317": the scheme must be http or https`},
		{"websocket limit", "websocket:\n  sendQueue: -1\n", `turngate.yaml: line 2 col 14: websocket.sendQueue: must not be negative, not -1`},
		{"origin pattern", "websocket:\n  originPatterns: [\"[bad\"]\n", `turngate.yaml: line 2 col 20: websocket.originPatterns[0]: "[bad" is not a valid host pattern (path.Match syntax, e.g. "*.example.com")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("turngate.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

// TestErrorReports loads the bad configs of testdata/config: each report
// holds every error of its phase (keys and types, or values) at once, in
// position order, each line positioned.
func TestErrorReports(t *testing.T) {
	checkReports(t, "testdata/config", "many", "structure")
}

// checkReports parses dir/NAME.yaml for each of names and compares its
// report with dir/NAME.golden (go test -update rewrites them); every line
// must start with the file, line and column, or go on an indented message.
func checkReports(t *testing.T, dir string, names ...string) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := dir + "/" + name + ".yaml"
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(path, data, env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			positioned := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `: line [1-9]\d* col [1-9]\d*: `)
			for _, line := range strings.Split(err.Error(), "\n") {
				if !positioned.MatchString(line) && !strings.HasPrefix(line, "    ") {
					t.Errorf("error without its file, line and column: %s", line)
				}
			}
			golden.Check(t, dir+"/"+name+".golden", err.Error()+"\n")
		})
	}
}

// TestErrorCap: a config with more errors than policy.MaxErrors reports
// the first ones and then how many more there are, from where.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("agents:\n")
	for i := range policy.MaxErrors + 10 {
		fmt.Fprintf(&b, "  - {name: a%d, model: ghost}\n", i)
	}
	_, err := Parse("turngate.yaml", []byte(b.String()), env(nil))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != policy.MaxErrors+1 {
		t.Fatalf("%d lines, want %d", len(lines), policy.MaxErrors+1)
	}
	if want := `turngate.yaml: line 51 col 24: agents[49] (a49): unknown model alias "ghost"`; lines[policy.MaxErrors-1] != want {
		t.Errorf("last error shown\n%s\nwant\n%s", lines[policy.MaxErrors-1], want)
	}
	if want := "turngate.yaml: line 52 col 24: 10 more errors from here on (the first 50 are shown)"; lines[policy.MaxErrors] != want {
		t.Errorf("last line\n%s\nwant\n%s", lines[policy.MaxErrors], want)
	}
}
