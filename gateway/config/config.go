// Package config is turngate's gateway configuration: plain structs decoded
// strictly from YAML (an unknown key is an error that names its line), with
// ${VAR} and ${VAR:-default} expansion in string values for secrets, and an
// embedded default used when no file is given.
package config

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/mcptool"
)

// Config is the whole gateway configuration.
type Config struct {
	// Listen is the HTTP listen address (host:port).
	Listen string `yaml:"listen"`
	// Providers are the upstream model providers.
	Providers []Provider `yaml:"providers"`
	// Models maps a model alias (what agents and rules name) to a provider
	// and its upstream model id.
	Models map[string]Model `yaml:"models"`
	// Tools are the tools agents may use, by name.
	Tools []Tool `yaml:"tools"`
	// MCPServers are MCP servers whose tools are exposed (under a prefix)
	// and usable by name in agents' tool lists and in mcp tool blocks.
	MCPServers []mcptool.ServerConfig `yaml:"mcpServers"`
	// Agents are the agents the gateway serves.
	Agents []Agent `yaml:"agents"`
	Rules  Rules   `yaml:"rules"`
	Store  Store   `yaml:"store"`
	Auth   Auth    `yaml:"auth"`
	Audit  Audit   `yaml:"audit"`
	Limits Limits  `yaml:"limits"`
	Debug  Debug   `yaml:"debug"`

	// Extensions are outside programs subscribed to hooks, dispatched in
	// this order after the rules (extensions.go).
	Extensions []Extension `yaml:"extensions"`
	// ApprovalWebhooks are told of approvals requested, decided and
	// expired (notify.go).
	ApprovalWebhooks []ApprovalWebhook `yaml:"approvalWebhooks"`
	// Tracing exports OpenTelemetry traces (off by default).
	Tracing Tracing `yaml:"tracing"`
	// WebSocket configures the WebSocket chat endpoint (websocket.go).
	WebSocket WebSocket `yaml:"websocket"`
	// Replica names this process among the replicas of one database.
	Replica Replica `yaml:"replica"`
	// Metrics configures GET /metrics (metrics.go).
	Metrics Metrics `yaml:"metrics"`
	// Quotas are usage limits: turns and token budgets per tenant,
	// principal or agent (quotas.go).
	Quotas []Quota `yaml:"quotas"`
	// Decisions configures the decision store (decisions.go).
	Decisions Decisions `yaml:"decisions"`
	// Retention erases the sessions of tenants idle longer than
	// configured (retention.go; agents set their own).
	Retention Retention `yaml:"retention"`

	// source is the file c was parsed from, for ErrorAt.
	source *source
}

// source is a config file's name and text.
type source struct {
	name string
	data []byte
}

// ErrorAt returns err positioned as Parse positions the config's own
// errors, "file: line N col M: err", at the value of the field at path
// ("listen", "rules.dir", "providers[0].script"), or at the enclosing
// mapping when the file does not set it: for what is checked after Parse,
// against the world, such as a listen address that needs API keys.
func (c *Config) ErrorAt(path string, err error) error {
	if c.source == nil {
		return err
	}
	return inFile(c.source.name, withLines(c.source.data, atField(path, "%w", err)))
}

// Revision identifies the text c was parsed from: "sha256:" and the hex
// SHA-256 of the file as read (empty for a Config not parsed from text).
// The live configuration compares it with the file on disk.
func (c *Config) Revision() string {
	if c.source == nil {
		return ""
	}
	return TextRevision(c.source.data)
}

// TextRevision is the Revision of a config parsed from data.
func TextRevision(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Debug configures diagnostics that are off by default.
type Debug struct {
	// Pprof serves net/http/pprof under /debug/pprof/ to the admin role.
	Pprof bool `yaml:"pprof"`
}

// Provider types.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
)

// Provider is one upstream model provider.
type Provider struct {
	Name string `yaml:"name"`
	// Type is openai, anthropic or scripted.
	Type    string `yaml:"type"`
	BaseURL string `yaml:"baseURL"`
	// APIKey is usually "${SOME_ENV_VAR}"; it is never logged.
	APIKey  string            `yaml:"apiKey"`
	Headers map[string]string `yaml:"headers"`
	// Script is a scripted provider's script file; empty means the
	// embedded default script.
	Script string `yaml:"script"`
	// ChunkDelay paces a scripted provider's stream parts (demos, tests).
	ChunkDelay time.Duration `yaml:"chunkDelay"`
}

// Model is what a model alias resolves to.
type Model struct {
	Provider string `yaml:"provider"`
	// Model is the upstream model id.
	Model string `yaml:"model"`
}

// Tool is one entry of the tools list: a tool of the tools package (http,
// mcp, agent or client runner), or a builtin, one of the gateway's
// deterministic demo executors (weather, search, delete, echo), which needs
// no network.
type Tool struct {
	tools.Config `yaml:",inline"`
	// Builtin names the builtin executor; set it instead of a runner block.
	Builtin string `yaml:"builtin"`
}

// Agent is one agent: a model, a system prompt, tools and the TurnConfig
// defaults of its turns, which beforeTurn rules may override. Unset
// defaults are left to the engine and the provider.
type Agent struct {
	Name   string `yaml:"name"`
	Model  string `yaml:"model"`
	System string `yaml:"system"`
	// Tools names entries of Config.Tools (or tools of mcpServers).
	Tools    []string `yaml:"tools"`
	MaxSteps int      `yaml:"maxSteps"`
	// ActiveTools, when set, limits the tools the model may call to these
	// names of Tools (the others stay declared to rules).
	ActiveTools []string `yaml:"activeTools"`
	// ToolChoice is auto, none, required or {type: tool, toolName: NAME}.
	ToolChoice       *ToolChoice  `yaml:"toolChoice"`
	Temperature      *float64     `yaml:"temperature"`
	TopP             *float64     `yaml:"topP"`
	TopK             *int         `yaml:"topK"`
	PresencePenalty  *float64     `yaml:"presencePenalty"`
	FrequencyPenalty *float64     `yaml:"frequencyPenalty"`
	StopSequences    []string     `yaml:"stopSequences"`
	Seed             *int64       `yaml:"seed"`
	MaxOutputTokens  *int         `yaml:"maxOutputTokens"`
	SendReasoning    *bool        `yaml:"sendReasoning"`
	MaxRetries       *int         `yaml:"maxRetries"`
	Timeout          AgentTimeout `yaml:"timeout"`
	// Headers are added to every upstream request of the agent's turns.
	Headers map[string]string `yaml:"headers"`
	// ProviderOptions are passed to the provider, keyed by provider name
	// (e.g. {openai: {reasoning_effort: low}}).
	ProviderOptions map[string]any `yaml:"providerOptions"`
	// BodySchema, if set, is a JSON Schema (YAML or JSON inline) the
	// custom body fields of the agent's requests must match; it also types
	// input.body in Rego rules (see BodySchema).
	BodySchema map[string]any `yaml:"bodySchema"`
	// Session configures context blocks, compaction, cached prompts and
	// history search (session.go).
	Session *Session `yaml:"session"`
	// Attachments overrides limits.attachments for this agent.
	Attachments *Attachments `yaml:"attachments"`
	// Retention, when set, erases the agent's sessions idle that long
	// (30d, 36h; retention.go).
	Retention string `yaml:"retention"`
}

// AgentTimeout bounds an agent's model streaming: Total the whole turn's,
// Chunk the wait for each next stream part. Zero means no bound (the
// turn is still bounded by limits.turnTimeout).
type AgentTimeout struct {
	Total time.Duration `yaml:"total"`
	Chunk time.Duration `yaml:"chunk"`
}

// ToolChoice is an agent's default tool choice, written as rules write it:
// the scalar auto, none or required, or the mapping {type: tool, toolName:
// NAME}.
type ToolChoice struct {
	engine.ToolChoice
}

// UnmarshalYAML accepts exactly the forms engine.ToolChoice accepts in
// JSON; any other is a type error at the value's line and column.
func (c *ToolChoice) UnmarshalYAML(n *yaml.Node) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = c.ToolChoice.UnmarshalJSON(raw)
	}
	if err != nil {
		// A type error, so that the decoder goes on and reports the
		// config's other errors too; Parse names the field.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d col %d: %v", n.Line, n.Column, err)}}
	}
	return nil
}

// TurnDefaults returns a's defaults as the engine's TurnConfig.
func (a *Agent) TurnDefaults() engine.TurnConfig {
	d := engine.TurnConfig{
		Temperature: a.Temperature, TopP: a.TopP, TopK: a.TopK,
		PresencePenalty: a.PresencePenalty, FrequencyPenalty: a.FrequencyPenalty, Seed: a.Seed,
		MaxOutputTokens: a.MaxOutputTokens, SendReasoning: a.SendReasoning, MaxRetries: a.MaxRetries,
		Headers: maps.Clone(a.Headers), ProviderOptions: a.ProviderOptions,
	}
	if a.MaxSteps > 0 {
		d.MaxSteps = new(a.MaxSteps)
	}
	if a.ActiveTools != nil {
		d.ActiveTools = new(slices.Clone(a.ActiveTools))
	}
	if a.ToolChoice != nil {
		d.ToolChoice = new(a.ToolChoice.ToolChoice)
	}
	if a.StopSequences != nil {
		d.StopSequences = new(slices.Clone(a.StopSequences))
	}
	if a.Timeout != (AgentTimeout{}) {
		d.Timeout = &engine.TimeoutConfig{TotalMs: a.Timeout.Total.Milliseconds(), ChunkMs: a.Timeout.Chunk.Milliseconds()}
	}
	return d
}

// Rules configures the rules directory.
type Rules struct {
	Dir string `yaml:"dir"`
	// FailOpen makes a rule evaluation error allow instead of fail closed.
	FailOpen bool `yaml:"failOpen"`
	// Watch reloads the directory when it changes (default true).
	Watch *bool `yaml:"watch"`
	// PollInterval is the watch's backstop poll (default 5s).
	PollInterval time.Duration `yaml:"pollInterval"`
	// RequireTests says whether the directory's tests (*_test.rego,
	// *_test.yaml) gate startup and every reload. Unset: they run when the
	// directory has any, and a revision whose tests fail is rejected like
	// one that does not compile. true: the same, and a directory without
	// tests is rejected too. false: they are not run on load (only
	// `turngate test` runs them).
	RequireTests *bool `yaml:"requireTests"`
	// Specialise evaluates the Rego decision rules with residuals
	// specialised per (tool, tenant) (default true; false: every call
	// evaluates the generic query). Decisions are the same either way.
	Specialise *bool `yaml:"specialise"`
}

// SpecialiseRules reports whether rules.specialise is on (unset: on).
func (r Rules) SpecialiseRules() bool { return r.Specialise == nil || *r.Specialise }

// Store drivers.
const (
	// StoreSQLite is the embedded default: a SQLite file.
	StoreSQLite = "sqlite"
	// StorePostgres is a PostgreSQL database.
	StorePostgres = "postgres"
)

// Store configures persistence.
type Store struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver string `yaml:"driver"`
	// Path is the SQLite file (default data/turngate.db).
	Path string `yaml:"path"`
	// Synchronous is SQLite's "full" (default: an acknowledged write
	// survives power loss) or "normal" (WAL synced at checkpoints only: a
	// process crash loses nothing, power loss may lose the last commits
	// but does not corrupt the file).
	Synchronous string `yaml:"synchronous"`
	// DSN names the PostgreSQL database, usually "${SOME_ENV_VAR}" since
	// it may hold a password; it is never logged.
	DSN string `yaml:"dsn"`
	// Timeout bounds every store call (default DefaultStoreTimeout): a
	// store that has not answered by then is unavailable, and the request
	// fails with 503 store_unavailable instead of waiting for it.
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultStoreTimeout is store.timeout's default.
const DefaultStoreTimeout = 5 * time.Second

// validate reports the store settings that do not fit its driver.
func (st *Store) validate(add func(path, format string, args ...any)) {
	switch st.Driver {
	case StoreSQLite:
		if st.Synchronous != "full" && st.Synchronous != "normal" {
			add("store.synchronous", "store.synchronous: must be full or normal, not %q", st.Synchronous)
		}
		if st.DSN != "" {
			add("store.dsn", "store.dsn: a PostgreSQL setting; set store.driver: postgres, or drop it")
		}
	case StorePostgres:
		if st.DSN == "" {
			add("store.dsn", "store.dsn: required with store.driver: postgres (for example \"${TURNGATE_DATABASE_URL}\")")
		}
		if st.Path != "" {
			add("store.path", "store.path: a SQLite setting; PostgreSQL takes store.dsn")
		}
		if st.Synchronous != "" {
			add("store.synchronous", "store.synchronous: a SQLite setting; PostgreSQL's durability is the server's synchronous_commit")
		}
	default:
		add("store.driver", "store.driver: must be sqlite or postgres, not %q", st.Driver)
	}
	notNegative(add, "store", "must be positive", map[string]any{"timeout": st.Timeout})
}

// Auth configures API keys and JWT bearer authentication. With neither,
// the gateway serves loopback only.
type Auth struct {
	APIKeys []APIKey `yaml:"apiKeys"`
	// JWT, when set, also accepts JSON Web Tokens of an OIDC identity
	// provider (jwt.go).
	JWT *JWT `yaml:"jwt"`
	// MaxFailuresPerMinute, when positive, refuses (429) the requests of a
	// client address that failed to authenticate this many times in the
	// current minute, until the minute ends. Off by default: clients
	// behind one proxy or NAT share an address.
	MaxFailuresPerMinute int `yaml:"maxFailuresPerMinute"`
}

// APIKey maps a bearer key to a principal. Exactly one of Key and
// KeySHA256 is set in the file; Parse replaces Key with its KeySHA256, so a
// parsed Config holds no plaintext key.
type APIKey struct {
	Key       string   `yaml:"key"`
	KeySHA256 string   `yaml:"keySha256"`
	Tenant    string   `yaml:"tenant"`
	Subject   string   `yaml:"subject"`
	Roles     []string `yaml:"roles"`
}

// Audit sinks.
const (
	SinkStdout = "stdout"
	SinkFile   = "file"
	SinkNone   = "none"
)

// Audit configures the audit log.
type Audit struct {
	// Sink is stdout, file or none.
	Sink       string `yaml:"sink"`
	Path       string `yaml:"path"`
	MaxSizeMB  int    `yaml:"maxSizeMB"`
	MaxBackups int    `yaml:"maxBackups"`
	// Redact lists dotted field paths whose values are replaced in every
	// audit line they match, e.g. "decision.input.password" or
	// "input.tool.input.password" (decision records) or
	// "toolCalls.*.input.password" (turn records); "*" matches any key or
	// array index.
	Redact []string `yaml:"redact"`
	// RecordInput puts the input each decision's rules evaluated into its
	// record, for `turngate replay` (default true).
	RecordInput *bool `yaml:"recordInput"`
}

// RecordsInput reports whether decision records carry their input:
// RecordInput, true when unset.
func (a *Audit) RecordsInput() bool { return a.RecordInput == nil || *a.RecordInput }

// Limits bounds requests and turns.
type Limits struct {
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	MaxMessages  int   `yaml:"maxMessages"`
	// TurnTimeout bounds one whole turn.
	TurnTimeout time.Duration `yaml:"turnTimeout"`
	// MaxQueuedTurnsPerSession bounds the requests waiting for a session's
	// turn lock; one more is answered 429.
	MaxQueuedTurnsPerSession int           `yaml:"maxQueuedTurnsPerSession"`
	ReadHeaderTimeout        time.Duration `yaml:"readHeaderTimeout"`
	// ShutdownTimeout is how long shutdown lets in-flight turns finish
	// before cancelling them.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
	// SubmissionWorkers is the number of submission workers.
	SubmissionWorkers int `yaml:"submissionWorkers"`
	// MaxConcurrentTools caps the tool executions running at once within
	// one turn (engine.Options.MaxConcurrentTools).
	MaxConcurrentTools int `yaml:"maxConcurrentTools"`
	// ToolTimeout bounds a tool execution when the tool sets no timeout of
	// its own (engine.Options.ToolTimeout).
	ToolTimeout time.Duration `yaml:"toolTimeout"`
	// MaxToolOutputBytes bounds a tool output when the tool sets no bound
	// of its own (engine.Options.MaxOutputBytes).
	MaxToolOutputBytes int `yaml:"maxToolOutputBytes"`
	// IdleTimeout closes a keep-alive connection that sends no next
	// request for this long.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// ReadBodyTimeout bounds reading a request's body, from its headers'
	// end; the response (a long chat stream) is not bounded by it.
	ReadBodyTimeout time.Duration `yaml:"readBodyTimeout"`
	// MaxConnections caps the connections served at once; more wait in
	// the kernel's accept queue.
	MaxConnections int `yaml:"maxConnections"`
	// ApprovalExpiry is how long a tool call waits for approval before it
	// is denied with reason "expired".
	ApprovalExpiry time.Duration `yaml:"approvalExpiry"`
	// StreamKeepAlive is how often a chat stream held open while its turn
	// waits for an approver sends an SSE keep-alive comment.
	StreamKeepAlive time.Duration `yaml:"streamKeepAlive"`
	// Attachments limits user messages' file parts (attachments.go).
	Attachments Attachments `yaml:"attachments"`
	// MaxQueuedSubmissionsPerSession and MaxQueuedSubmissionsPerTenant
	// bound the queued submissions of one session and of one tenant; a
	// submission beyond either is answered 429.
	MaxQueuedSubmissionsPerSession int `yaml:"maxQueuedSubmissionsPerSession"`
	MaxQueuedSubmissionsPerTenant  int `yaml:"maxQueuedSubmissionsPerTenant"`
}

// Defaults for unset limits.
const (
	DefaultListen                   = "127.0.0.1:8080"
	DefaultMaxBodyBytes             = 4 << 20 // a long transcript with small attachments
	DefaultMaxMessages              = 1000
	DefaultTurnTimeout              = 5 * time.Minute
	DefaultMaxQueuedTurnsPerSession = 4
	DefaultReadHeaderTimeout        = 10 * time.Second
	DefaultShutdownTimeout          = 30 * time.Second
	DefaultSubmissionWorkers        = 4
	DefaultMaxConcurrentTools       = 8
	DefaultToolTimeout              = 60 * time.Second
	DefaultMaxToolOutputBytes       = 64 << 10
	DefaultIdleTimeout              = 60 * time.Second // as nginx's keepalive_timeout (75s), a little shorter
	DefaultReadBodyTimeout          = 30 * time.Second // limits.maxBodyBytes (4 MiB) at 140 KB/s
	DefaultMaxConnections           = 16384            // about 20 KiB each when idle: 320 MiB at most
	DefaultApprovalExpiry           = 24 * time.Hour
	DefaultStreamKeepAlive          = 15 * time.Second // under the usual 60s idle timeouts of proxies
	DefaultPollInterval             = 5 * time.Second
	DefaultAuditMaxSizeMB           = 100
	DefaultAuditMaxBackups          = 5
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default configuration's text.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default returns the embedded default configuration: a demo agent on the
// scripted model with the weather, search and delete demo tools, SQLite under
// ./data, the rules in ./rules, listening on loopback. Its relative paths
// are the working directory's (cmd/turngate serves the embedded rules when
// ./rules is missing).
func Default() (*Config, error) {
	return Parse("default.yaml", defaultYAML, os.LookupEnv)
}

// Load reads and parses the file at path, expanding ${VAR} from the
// process environment. Relative file paths in it (rules.dir, store.path,
// audit.path, providers' script, exec extensions' programs, context
// blocks' files) resolve against the file's directory, each exec
// extension's program must be one the gateway can start (checkCommands),
// and each context block's file one its turns can read (checkContextFiles).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return parse(path, data, os.LookupEnv, dir)
}

// Parse decodes data strictly, expands ${VAR} in string values with
// lookup, applies defaults and validates. name labels errors: each starts
// with it, then the line and column of what it is about when known.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	return parse(name, data, lookup, "")
}

// parse is Parse; a non-empty dir is the directory of the config file,
// against which its relative paths resolve (resolvePaths) before it is
// validated, and whose exec extensions' programs and context blocks'
// files must then be found (checkCommands, checkContextFiles), in the same
// report as the other errors.
func parse(name string, data []byte, lookup func(string) (string, bool), dir string) (*Config, error) {
	var c Config
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, inFile(name, []*posError{syntaxError(data, err)})
	}
	errs := duplicateKeys(&root)
	errs = append(errs, unknownKeys(&root)...)
	if len(root.Content) > 0 {
		// Not strict: unknownKeys reported the unknown keys, in YAML terms.
		if err := root.Decode(&c); err != nil {
			errs = append(errs, friendlyTypeErrors(&root, err)...)
		}
	}
	if len(errs) > 0 {
		// A value the decoder could not take is left unset: validating
		// what was decoded would report it again, in other words.
		return nil, inFile(name, errs)
	}
	envErrs := expandEnv(reflect.ValueOf(&c).Elem(), "", lookup)
	c.applyDefaults()
	if dir != "" {
		c.resolvePaths(dir)
	}
	verrs := Flatten(c.Validate())
	if dir != "" {
		verrs = append(verrs, Flatten(c.checkCommands())...)
		verrs = append(verrs, Flatten(c.checkContextFiles())...)
	}
	if len(envErrs)+len(verrs) > 0 {
		return nil, inFile(name, withLines(data, errors.Join(append(envErrs, unexpanded(envErrs, verrs)...)...)))
	}
	c.hashKeys()
	c.source = &source{name: name, data: data}
	return &c, nil
}

// unexpanded returns the errors of errs that are not about a value whose
// ${VAR} could not be expanded (envErrs): the value was left as written,
// and its error is that.
func unexpanded(envErrs, errs []error) []error {
	failed := map[string]bool{}
	for _, e := range envErrs {
		if fe := (*fieldError)(nil); errors.As(e, &fe) {
			failed[fe.path] = true
		}
	}
	return slices.DeleteFunc(errs, func(e error) bool {
		fe := (*fieldError)(nil)
		return errors.As(e, &fe) && failed[fe.path]
	})
}

// hashKeys replaces every plaintext API key, and the metrics key, with
// its SHA-256.
func (c *Config) hashKeys() {
	c.Metrics.hashKey()
	for i := range c.Auth.APIKeys {
		k := &c.Auth.APIKeys[i]
		if k.Key != "" {
			sum := sha256.Sum256([]byte(k.Key))
			k.KeySHA256, k.Key = hex.EncodeToString(sum[:]), ""
		}
	}
}

func (c *Config) applyDefaults() {
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.Store.Driver = cmp.Or(c.Store.Driver, StoreSQLite)
	c.Store.Timeout = cmp.Or(c.Store.Timeout, DefaultStoreTimeout)
	c.Decisions.Retention = cmp.Or(c.Decisions.Retention, DefaultDecisionRetention)
	if c.Store.Driver == StoreSQLite {
		c.Store.Path = cmp.Or(c.Store.Path, "data/turngate.db")
		c.Store.Synchronous = cmp.Or(c.Store.Synchronous, "full")
	}
	c.Rules.Dir = cmp.Or(c.Rules.Dir, "rules")
	if c.Rules.Watch == nil {
		watch := true
		c.Rules.Watch = &watch
	}
	c.Rules.PollInterval = cmp.Or(c.Rules.PollInterval, DefaultPollInterval)
	c.Audit.Sink = cmp.Or(c.Audit.Sink, SinkStdout)
	c.Audit.MaxSizeMB = cmp.Or(c.Audit.MaxSizeMB, DefaultAuditMaxSizeMB)
	c.Audit.MaxBackups = cmp.Or(c.Audit.MaxBackups, DefaultAuditMaxBackups)
	l := &c.Limits
	l.MaxBodyBytes = cmp.Or(l.MaxBodyBytes, DefaultMaxBodyBytes)
	l.MaxMessages = cmp.Or(l.MaxMessages, DefaultMaxMessages)
	l.TurnTimeout = cmp.Or(l.TurnTimeout, DefaultTurnTimeout)
	l.MaxQueuedTurnsPerSession = cmp.Or(l.MaxQueuedTurnsPerSession, DefaultMaxQueuedTurnsPerSession)
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ShutdownTimeout = cmp.Or(l.ShutdownTimeout, DefaultShutdownTimeout)
	l.MaxConcurrentTools = cmp.Or(l.MaxConcurrentTools, DefaultMaxConcurrentTools)
	l.ToolTimeout = cmp.Or(l.ToolTimeout, DefaultToolTimeout)
	l.MaxToolOutputBytes = cmp.Or(l.MaxToolOutputBytes, DefaultMaxToolOutputBytes)
	l.SubmissionWorkers = cmp.Or(l.SubmissionWorkers, DefaultSubmissionWorkers)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultIdleTimeout)
	l.ReadBodyTimeout = cmp.Or(l.ReadBodyTimeout, DefaultReadBodyTimeout)
	l.MaxConnections = cmp.Or(l.MaxConnections, DefaultMaxConnections)
	l.ApprovalExpiry = cmp.Or(l.ApprovalExpiry, DefaultApprovalExpiry)
	l.StreamKeepAlive = cmp.Or(l.StreamKeepAlive, DefaultStreamKeepAlive)
	c.applyExtensionDefaults()
	c.applyWebhookDefaults()
	c.applySessionDefaults()
	l.Attachments.setDefaults(l.MaxBodyBytes)
	c.WebSocket.applyDefaults(l.MaxBodyBytes)
	l.MaxQueuedSubmissionsPerSession = cmp.Or(l.MaxQueuedSubmissionsPerSession, DefaultMaxQueuedSubmissionsPerSession)
	l.MaxQueuedSubmissionsPerTenant = cmp.Or(l.MaxQueuedSubmissionsPerTenant, DefaultMaxQueuedSubmissionsPerTenant)
	c.Replica.applyDefaults()
	c.Auth.JWT.applyDefaults()
}

// Authenticated reports whether requests must authenticate: API keys or
// auth.jwt are configured.
func (c *Config) Authenticated() bool { return len(c.Auth.APIKeys) > 0 || c.Auth.JWT != nil }

// Agent returns the agent named name.
func (c *Config) Agent(name string) (*Agent, bool) {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i], true
		}
	}
	return nil, false
}

// Validate reports every inconsistency of c in one error, each about the
// value at a field path (Parse positions them at its line and column).
func (c *Config) Validate() error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, atField(path, format, args...)) }

	providers := map[string]bool{}
	for i, p := range c.Providers {
		item := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.Name == "":
			add(item+".name", "%s: name is required", item)
		case providers[p.Name]:
			add(item+".name", "%s: duplicate provider %q", item, p.Name)
		case strings.Contains(p.Name, "/"):
			add(item+".name", "%s: name %q must not contain a slash (a model may be named provider/model)", item, p.Name)
		}
		providers[p.Name] = true
		switch p.Type {
		case ProviderOpenAI, ProviderAnthropic, ProviderScripted:
		default:
			add(item+".type", "%s (%s): type must be openai, anthropic or scripted, not %q", item, p.Name, p.Type)
		}
	}
	for _, alias := range slices.Sorted(maps.Keys(c.Models)) {
		m, item := c.Models[alias], keyPath("models", alias)
		if prov, model, ok := strings.Cut(alias, "/"); ok && providers[prov] {
			// The registry resolves an alias first: it would hide the model.
			errs = append(errs, atKey(item, "%s: %q already names model %q of provider %q; an alias must not hide it", item, alias, model, prov))
		}
		if !providers[m.Provider] {
			add(item+".provider", "%s: unknown provider %q", item, m.Provider)
		}
		if m.Model == "" {
			add(item+".model", "%s: model is required", item)
		}
	}
	toolNames := map[string]bool{}
	for i, t := range c.Tools {
		item := fmt.Sprintf("tools[%d]", i)
		if toolNames[t.Name] {
			add(item+".name", "%s: duplicate tool %q", item, t.Name)
		}
		toolNames[t.Name] = true
		if t.Builtin != "" && (t.HTTP != nil || t.MCP != nil || t.Agent != nil || t.Client != nil) {
			add(item+".builtin", "%s (%s): builtin and a runner block are exclusive", item, t.Name)
		}
	}
	c.validateMCPServers(add)
	agents := map[string]bool{}
	for i, a := range c.Agents {
		item := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.Name == "":
			add(item+".name", "%s: name is required", item)
		case agents[a.Name]:
			add(item+".name", "%s: duplicate agent %q", item, a.Name)
		}
		agents[a.Name] = true
		label := fmt.Sprintf("%s (%s)", item, a.Name)
		if _, ok := c.Models[a.Model]; !ok {
			add(item+".model", "%s: unknown model alias %q", label, a.Model)
		}
		for j, t := range a.Tools {
			// Tools of mcpServers are named by their servers at run time.
			if !toolNames[t] && len(c.MCPServers) == 0 {
				add(fmt.Sprintf("%s.tools[%d]", item, j), "%s: unknown tool %q", label, t)
			}
		}
		a.validate(func(field, format string, args ...any) {
			add(item+"."+field, "%s: "+format, append([]any{label}, args...)...)
		}, len(c.MCPServers) > 0)
		a.Attachments.validate(item+".attachments", label+": attachments", c.Limits.MaxBodyBytes, add)
	}
	c.validateSessions(add)
	c.validateQuotas(add)
	c.Store.validate(add)
	c.Replica.validate(add)
	c.Metrics.validate(c.Listen, add)
	c.Decisions.validate(add)
	c.validateRetention(add)
	notNegative(add, "auth", mustNotBeNegative, map[string]any{"maxFailuresPerMinute": c.Auth.MaxFailuresPerMinute})
	for i, k := range c.Auth.APIKeys {
		item := fmt.Sprintf("auth.apiKeys[%d]", i)
		if (k.Key == "") == (k.KeySHA256 == "") {
			add(item, "%s: set exactly one of key and keySha256", item)
		}
		if k.KeySHA256 != "" && !isSHA256Hex(k.KeySHA256) {
			add(item+".keySha256", "%s: keySha256 must be 64 hex digits", item)
		}
		if k.Tenant == "" {
			add(item+".tenant", "%s: tenant is required", item)
		}
	}
	c.Auth.JWT.validate(add)
	switch c.Audit.Sink {
	case SinkStdout, SinkNone:
	case SinkFile:
		if c.Audit.Path == "" {
			add("audit.path", "audit.path: required for the file sink")
		}
	default:
		add("audit.sink", "audit.sink: must be stdout, file or none, not %q", c.Audit.Sink)
	}
	l := c.Limits
	notNegative(add, "limits", mustNotBeNegative, map[string]any{
		"maxBodyBytes": l.MaxBodyBytes, "maxMessages": l.MaxMessages, "turnTimeout": l.TurnTimeout,
		"maxQueuedTurnsPerSession": l.MaxQueuedTurnsPerSession, "readHeaderTimeout": l.ReadHeaderTimeout,
		"shutdownTimeout": l.ShutdownTimeout, "submissionWorkers": l.SubmissionWorkers,
		"maxQueuedSubmissionsPerSession": l.MaxQueuedSubmissionsPerSession, "maxQueuedSubmissionsPerTenant": l.MaxQueuedSubmissionsPerTenant,
	})
	// Zero takes the default for these; their errors have always said "must be positive".
	notNegative(add, "limits", "must be positive", map[string]any{
		"approvalExpiry": l.ApprovalExpiry, "streamKeepAlive": l.StreamKeepAlive, "maxConcurrentTools": l.MaxConcurrentTools,
		"toolTimeout": l.ToolTimeout, "maxToolOutputBytes": l.MaxToolOutputBytes,
	})
	c.validateExtensions(add)
	c.validateWebhooks(add)
	c.Tracing.validate(func(err error) { errs = append(errs, err) })
	l.Attachments.validate("limits.attachments", "limits.attachments", l.MaxBodyBytes, add)
	c.check(add)
	c.WebSocket.validate(add)
	return errors.Join(errs...)
}

// validateMCPServers reports each MCP server's problems (mcptool's own
// checks, which the gateway would refuse at startup) at the key each is
// about, and a name used twice.
func (c *Config) validateMCPServers(add func(path, format string, args ...any)) {
	keys := yamlFields(reflect.TypeFor[mcptool.ServerConfig]())
	names := map[string]bool{}
	for i, s := range c.MCPServers {
		item := fmt.Sprintf("mcpServers[%d]", i)
		for _, err := range Flatten(s.Validate()) {
			path := item
			if k := leadingWord.FindString(err.Error()); keys[k] != nil {
				path += "." + k
			}
			add(path, "%s (%s): %v", item, s.Name, err)
		}
		if names[s.Name] {
			add(item+".name", "%s: duplicate MCP server %q", item, s.Name)
		}
		names[s.Name] = true
	}
}

// leadingWord matches the key an mcptool error starts with.
var leadingWord = regexp.MustCompile(`^[A-Za-z]+`)

// mustNotBeNegative is notNegative's usual wording of its rule.
const mustNotBeNegative = "must not be negative"

// notNegative reports, each at its value, the settings of the block at
// path (a key's number or duration) that are negative, as "path.key: rule,
// not value".
func notNegative(add func(path, format string, args ...any), path, rule string, values map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v := reflect.ValueOf(values[k])
		if v.Int() < 0 {
			add(path+"."+k, "%s.%s: %s, not %v", path, k, rule, values[k])
		}
	}
}

// validate reports a's inconsistent defaults through add, each with the
// field it is about within the agent. With MCP servers, tool names are
// only known at run time.
func (a *Agent) validate(add func(field, format string, args ...any), mcp bool) {
	if a.MaxSteps < 0 {
		add("maxSteps", "maxSteps must not be negative")
	}
	for j, t := range a.ActiveTools {
		if !slices.Contains(a.Tools, t) {
			add(fmt.Sprintf("activeTools[%d]", j), "activeTools: %q is not one of the agent's tools", t)
		}
	}
	if tc := a.ToolChoice; tc != nil && tc.Type == engine.ToolChoiceTool && !slices.Contains(a.Tools, tc.ToolName) && !mcp {
		add("toolChoice.toolName", "toolChoice: %q is not one of the agent's tools", tc.ToolName)
	}
	if a.TopK != nil && *a.TopK < 1 {
		add("topK", "topK must be at least 1")
	}
	if a.MaxOutputTokens != nil && *a.MaxOutputTokens < 1 {
		add("maxOutputTokens", "maxOutputTokens must be at least 1")
	}
	if a.MaxRetries != nil && *a.MaxRetries < 0 {
		add("maxRetries", "maxRetries must not be negative")
	}
	notNegative(add, "timeout", mustNotBeNegative,
		map[string]any{"total": a.Timeout.Total, "chunk": a.Timeout.Chunk})
	if _, err := json.Marshal(a.ProviderOptions); err != nil {
		add("providerOptions", "providerOptions: not representable as JSON: %v", err)
	}
	if _, err := a.CompileBodySchema(); err != nil {
		add(schemaPath("bodySchema", err), "bodySchema: %v", err)
	}
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}
