package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"
)

// Session is an agent's session configuration, the declarative
// counterpart of the reference's configureSession: the context blocks its
// system prompt is built from, compaction of long conversations, cache
// friendly prompts and a history search tool.
type Session struct {
	// Context blocks, in order. When an agent has any, its system prompt is
	// built from them instead of Agent.System.
	Context []ContextBlock `yaml:"context"`
	// Compaction summarizes the older part of a long conversation.
	Compaction *Compaction `yaml:"compaction"`
	// CachedPrompt makes the provider requests cache friendly: static
	// blocks first, Anthropic cache_control breakpoints on the system
	// blocks, the compaction summary and the conversation.
	CachedPrompt bool `yaml:"cachedPrompt"`
	// HistorySearch offers the model the search_history tool over the
	// session's own stored messages.
	HistorySearch bool `yaml:"historySearch"`
}

// ContextBlock is one named part of the system prompt. Exactly one source
// is set: Text, File, HTTP or Writable.
type ContextBlock struct {
	Name string `yaml:"name"`
	// Description is rendered with the block (and tells the model what a
	// writable block is for).
	Description string `yaml:"description"`
	// Text is the block's content, inline.
	Text *string `yaml:"text"`
	// File is read for the block's content and read again when it
	// changes; a relative path is the config file's directory's.
	File string `yaml:"file"`
	// HTTP fetches the block's content with a GET.
	HTTP *HTTPBlock `yaml:"http"`
	// Writable makes a block the model updates through the update_context
	// tool, stored per session, at most MaxTokens long.
	Writable  bool `yaml:"writable"`
	MaxTokens int  `yaml:"maxTokens"`
}

// HTTPBlock is the source of a context block fetched over HTTP.
type HTTPBlock struct {
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one fetch (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// CacheTTL is how long a fetched content is used before the next
	// fetch (default 60s).
	CacheTTL time.Duration `yaml:"cacheTTL"`
	// Fallback, when set, is the content used when a fetch fails;
	// otherwise a failed fetch fails the turn with a clear error.
	Fallback *string `yaml:"fallback"`
}

// Compaction configures conversation compaction.
type Compaction struct {
	// After is the token threshold: when the last step's reported input
	// tokens (or an estimate before any) pass it, the turn compacts first.
	After int `yaml:"after"`
	// Model is the model alias that writes the summary (default the agent's).
	Model string `yaml:"model"`
	// Prompt is the summarizing instruction (default DefaultCompactionPrompt).
	Prompt string `yaml:"prompt"`
	// KeepLast is the number of recent messages kept verbatim (default 4).
	KeepLast int `yaml:"keepLast"`
	// Reactive compacts once and retries the step when the upstream
	// rejects it for overflowing the context window (default true).
	Reactive *bool `yaml:"reactive"`
}

// Defaults of the session configuration.
const (
	DefaultHTTPBlockTimeout  = 5 * time.Second
	DefaultHTTPBlockCacheTTL = time.Minute
	// DefaultKeepLast is the reference's recent full-fidelity window
	// (MODEL_RECENT_WINDOW, think-implementation.md §2.12).
	DefaultKeepLast = 4
	// DefaultCompactionPrompt asks for a summary that can replace the
	// messages it covers.
	DefaultCompactionPrompt = "Summarize the conversation below so that it can replace it: keep the facts, decisions, names, numbers and open questions; drop pleasantries. Answer with the summary only."
)

// MaxSourceBytes bounds what a file or HTTP context block may hold: a
// system prompt block, not a document store. The turns enforce it on every
// read; Load checks file blocks against it once (checkContextFiles).
const MaxSourceBytes = 1 << 20

// IsReactive reports whether c compacts after a context overflow
// (Reactive, true when unset).
func (c *Compaction) IsReactive() bool { return c.Reactive == nil || *c.Reactive }

// blockName is what a context block may be called: it is a CEL map key
// and a tool argument, so a plain identifier.
var blockName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// applyDefaults fills the session's unset settings.
func (s *Session) applyDefaults(agentModel string) {
	for i := range s.Context {
		if h := s.Context[i].HTTP; h != nil {
			if h.Timeout == 0 {
				h.Timeout = DefaultHTTPBlockTimeout
			}
			if h.CacheTTL == 0 {
				h.CacheTTL = DefaultHTTPBlockCacheTTL
			}
		}
	}
	if c := s.Compaction; c != nil {
		if c.Model == "" {
			c.Model = agentModel
		}
		if c.Prompt == "" {
			c.Prompt = DefaultCompactionPrompt
		}
		if c.KeepLast == 0 {
			c.KeepLast = DefaultKeepLast
		}
	}
}

// applySessionDefaults fills the unset session settings of every agent.
func (c *Config) applySessionDefaults() {
	for i := range c.Agents {
		if s := c.Agents[i].Session; s != nil {
			s.applyDefaults(c.Agents[i].Model)
		}
	}
}

// validateSessions reports, through add, the session settings of every
// agent that do not hold together. Each error starts with the setting's
// path, so Parse can name its line.
func (c *Config) validateSessions(add func(path, format string, args ...any)) {
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Session == nil {
			continue
		}
		a.Session.validate(fmt.Sprintf("agents[%d].session", i), c.Models, add)
	}
}

func (s *Session) validate(path string, models map[string]Model, add func(path, format string, args ...any)) {
	names := map[string]bool{}
	for j := range s.Context {
		b := &s.Context[j]
		at := fmt.Sprintf("%s.context[%d]", path, j)
		switch {
		case !blockName.MatchString(b.Name):
			add(at+".name", "%s: name must be a letter then up to 63 letters, digits, _ or -, not %q", at, b.Name)
		case names[b.Name]:
			add(at+".name", "%s: duplicate context block %q", at, b.Name)
		}
		names[b.Name] = true
		sources := 0
		for _, set := range []bool{b.Text != nil, b.File != "", b.HTTP != nil, b.Writable} {
			if set {
				sources++
			}
		}
		if sources != 1 {
			add(at, "%s (%s): set exactly one source: text, file, http or writable: true", at, b.Name)
		}
		switch {
		case b.Writable && b.MaxTokens < 1:
			add(at+".maxTokens", "%s (%s): a writable block needs maxTokens of at least 1", at, b.Name)
		case !b.Writable && b.MaxTokens != 0:
			add(at+".maxTokens", "%s (%s): maxTokens bounds a writable block only", at, b.Name)
		}
		if h := b.HTTP; h != nil {
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(at+".http.url", "%s.http (%s): url must be an http or https URL, not %q", at, b.Name, h.URL)
			}
			notNegative(add, at+".http", mustNotBeNegative, map[string]any{"timeout": h.Timeout, "cacheTTL": h.CacheTTL})
		}
	}
	if cp := s.Compaction; cp != nil {
		at := path + ".compaction"
		if cp.After < 1 {
			add(at+".after", "%s: after must be a token count of at least 1", at)
		}
		if _, ok := models[cp.Model]; !ok {
			add(at+".model", "%s: unknown model alias %q", at, cp.Model)
		}
		if cp.KeepLast < 1 {
			add(at+".keepLast", "%s: keepLast must be at least 1", at)
		}
	}
}

// checkContextFiles reports, each at its file, the context blocks whose
// file the turns could not read: missing, unreadable, a directory, or over
// MaxSourceBytes. Only that the file can be read now is checked: its
// content may change later, and the turns read it again when it does.
// Load calls it, once the paths are resolved as the turns will read them.
func (c *Config) checkContextFiles() error {
	var errs []error
	for i, a := range c.Agents {
		if a.Session == nil {
			continue
		}
		for j, b := range a.Session.Context {
			if b.File == "" {
				continue
			}
			if err := readableBlock(b.File); err != nil {
				at := fmt.Sprintf("agents[%d].session.context[%d]", i, j)
				errs = append(errs, atField(at+".file", "%s (%s): file: %v", at, b.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// readableBlock returns why the file at path cannot be a context block's
// content, or nil: opening it is the readability check, its size the bound.
func readableBlock(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case st.Size() > MaxSourceBytes:
		return fmt.Errorf("%s is %d bytes, over the %d a block may hold", path, st.Size(), MaxSourceBytes)
	}
	return nil
}
