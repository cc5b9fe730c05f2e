// Package scripted is turngate's embedded default model: no key, no
// network, deterministic. A small YAML script (see README.md) maps the last
// user text or the last tool result to a reply of text, reasoning, tool
// calls or structured output, streamed in chunks at a configurable rate.
package scripted

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/tracing"
)

// DefaultChunkSize is how many characters one text, reasoning or tool-input
// delta carries unless WithChunkSize says otherwise: small enough that a
// short reply still streams in several parts.
const DefaultChunkSize = 16

// Provider is the scripted model. It is safe for concurrent use.
type Provider struct {
	script    *Script
	chunkSize int
	delay     time.Duration
}

// Option configures a Provider.
type Option func(*Provider)

// WithChunkSize sets how many characters each delta part carries (n < 1
// keeps the default).
func WithChunkSize(n int) Option {
	return func(p *Provider) {
		if n >= 1 {
			p.chunkSize = n
		}
	}
}

// WithChunkDelay paces the stream at one part per d, to simulate a real
// model's rate: part k (counting from 0) is released k × d after the first.
// The schedule is absolute, so a late timer does not delay the parts after
// it, and a consumer slower than the rate gets the overdue parts at once; a
// step of n parts takes (n − 1) × d. The default is no pause.
func WithChunkDelay(d time.Duration) Option {
	return func(p *Provider) { p.delay = max(d, 0) }
}

// New returns a Provider answering from script.
func New(script *Script, opts ...Option) *Provider {
	p := &Provider{script: script, chunkSize: DefaultChunkSize}
	for _, o := range opts {
		o(p)
	}
	return p
}

//go:embed default.yaml
var defaultYAML []byte

// defaultScript parses the embedded script once; the tests prove it valid.
var defaultScript = sync.OnceValue(func() *Script {
	s, err := Parse("default.yaml", defaultYAML)
	if err != nil {
		panic("scripted: embedded default.yaml: " + err.Error())
	}
	return s
})

// DefaultScript returns the embedded default script (weather, search and
// delete tool calls; everything else is echoed).
func DefaultScript() *Script { return defaultScript() }

// Default returns a Provider running the embedded default script.
func Default(opts ...Option) *Provider { return New(DefaultScript(), opts...) }

// Stream answers req from the script. It never fails except for a context
// that is already done.
func (p *Provider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tracing.SetProvider(ctx, "turngate.scripted")
	r := p.script.reply(req)
	r.applyTools(req)
	r.applyOutput(req)
	return &stream{ctx: ctx, parts: p.parts(req, r), delay: p.delay, done: make(chan struct{})}, nil
}

// parts renders a reply as the stream parts a real model would send.
func (p *Provider) parts(req *engine.ModelRequest, r *reply) []engine.StreamPart {
	step := 0
	for _, m := range req.Messages {
		if m.Role == engine.RoleAssistant {
			step++
		}
	}
	var parts []engine.StreamPart
	block := func(start, delta, end, id, text string) {
		if text == "" {
			return
		}
		parts = append(parts, engine.StreamPart{Type: start, ID: id})
		for c := range chunks(text, p.chunkSize) {
			parts = append(parts, engine.StreamPart{Type: delta, ID: id, Text: c})
		}
		parts = append(parts, engine.StreamPart{Type: end, ID: id})
	}
	block(engine.StreamReasoningStart, engine.StreamReasoningDelta, engine.StreamReasoningEnd, fmt.Sprintf("reasoning_%d", step), r.reasoning)
	block(engine.StreamTextStart, engine.StreamTextDelta, engine.StreamTextEnd, fmt.Sprintf("text_%d", step), r.text)
	outChars := len(r.reasoning) + len(r.text)
	for n, c := range r.calls {
		id := fmt.Sprintf("call_%d_%d", step, n)
		parts = append(parts, engine.StreamPart{Type: engine.StreamToolInputStart, ID: id, ToolCallID: id, ToolName: c.name})
		for ch := range chunks(string(c.input), p.chunkSize) {
			parts = append(parts, engine.StreamPart{Type: engine.StreamToolInputDelta, ID: id, ToolCallID: id, Text: ch})
		}
		parts = append(parts, engine.StreamPart{Type: engine.StreamToolCall, ID: id, ToolCallID: id, ToolName: c.name, Input: c.input})
		outChars += len(c.name) + len(c.input)
	}
	finish := engine.FinishStop
	if len(r.calls) > 0 {
		finish = engine.FinishToolCalls
	}
	usage := engine.Usage{InputTokens: tokens(inputChars(req)), OutputTokens: tokens(outChars), ReasoningTokens: tokens(len(r.reasoning))}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	meta, _ := json.Marshal(map[string]any{"scripted": map[string]string{"rule": r.rule}})
	return append(parts, engine.StreamPart{Type: engine.StreamFinish, FinishReason: finish, Usage: &usage, ProviderMetadata: meta})
}

// chunks yields s in pieces of at most n characters.
func chunks(s string, n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for rest := s; rest != ""; {
			i, count := 0, 0
			for i < len(rest) && count < n {
				_, size := utf8.DecodeRuneInString(rest[i:])
				i += size
				count++
			}
			if !yield(rest[:i]) {
				return
			}
			rest = rest[i:]
		}
	}
}

// tokens synthesises a token count: a byte count over four, rounded up,
// the usual rule of thumb for English text.
func tokens(bytes int) int { return (bytes + 3) / 4 }

// inputChars counts the bytes of everything the request sends the model.
func inputChars(req *engine.ModelRequest) int {
	n := len(req.System)
	for _, m := range req.Messages {
		for _, c := range m.Content {
			n += len(c.Text) + len(c.ToolName) + len(c.Input) + len(c.Output)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return n
}

// stream replays precomputed parts, paced by delay when it is set.
type stream struct {
	ctx   context.Context
	parts []engine.StreamPart
	delay time.Duration
	next  int
	cur   engine.StreamPart
	err   error
	// start is when the first part was released; part k is due at
	// start + k × delay.
	start time.Time
	// timer waits for the next due part; made on the first wait, reused.
	timer *time.Timer
	// done is closed by Close; Next returns false once it is.
	done      chan struct{}
	closeOnce sync.Once
}

// Next advances to the next part; it returns false at the end, on Close and
// when the context is done (Err then returns the context's error).
func (s *stream) Next() bool {
	if s.err != nil || s.next >= len(s.parts) {
		return false
	}
	select {
	case <-s.done:
		return false
	case <-s.ctx.Done():
		s.err = s.ctx.Err()
		return false
	default:
	}
	if s.delay > 0 && !s.wait() {
		return false
	}
	s.cur = s.parts[s.next]
	s.next++
	return true
}

// wait blocks until the next part is due; it returns false when the
// stream is closed or its context is done first.
func (s *stream) wait() bool {
	if s.next == 0 {
		s.start = time.Now()
		return true
	}
	d := time.Until(s.start.Add(time.Duration(s.next) * s.delay))
	if d <= 0 {
		return true
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.done:
		return false
	case <-s.ctx.Done():
		s.err = s.ctx.Err()
		return false
	case <-s.timer.C:
		return true
	}
}

// Current returns the part Next advanced to.
func (s *stream) Current() engine.StreamPart { return s.cur }

// Err returns the context's error if streaming stopped because of it.
func (s *stream) Err() error { return s.err }

// Close stops the stream; it is safe to call more than once and
// concurrently with Next.
func (s *stream) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

// reply is what the model answers, before it is rendered as parts.
type reply struct {
	rule      string
	reasoning string
	text      string
	calls     []call
	output    any
}

// call is one tool call of a reply, its input as JSON.
type call struct {
	name  string
	input json.RawMessage
}

// note appends a sentence to the reply's text.
func (r *reply) note(s string) {
	if r.text != "" {
		r.text += " "
	}
	r.text += s
}

// applyTools enforces the request's tool offer and tool choice: the model
// only calls offered tools, never calls one under "none", always calls one
// under "required", and calls the named tool under {type: tool}.
func (r *reply) applyTools(req *engine.ModelRequest) {
	offered := make(map[string]engine.ToolInfo, len(req.Tools))
	for _, t := range req.Tools {
		offered[t.Name] = t
	}
	kept := r.calls[:0]
	for _, c := range r.calls {
		if _, ok := offered[c.name]; ok {
			kept = append(kept, c)
		} else {
			r.note(fmt.Sprintf("(I would call the %q tool, but it is not offered.)", c.name))
		}
	}
	r.calls = kept
	choice := engine.ToolChoiceAuto
	if req.ToolChoice != nil && req.ToolChoice.Type != "" {
		choice = req.ToolChoice.Type
	}
	switch choice {
	case engine.ToolChoiceNone:
		for _, c := range r.calls {
			r.note(fmt.Sprintf("(I would call the %q tool, but tool calls are disabled.)", c.name))
		}
		r.calls = nil
	case engine.ToolChoiceRequired:
		if len(r.calls) == 0 && len(req.Tools) > 0 {
			r.calls = []call{sampleCall(req.Tools[0])}
		}
	case engine.ToolChoiceTool:
		name := req.ToolChoice.ToolName
		t, ok := offered[name]
		if !ok {
			r.note(fmt.Sprintf("(I was asked to call the %q tool, but it is not offered.)", name))
			r.calls = nil
			return
		}
		forced := r.calls[:0]
		for _, c := range r.calls {
			if c.name == name {
				forced = append(forced, c)
			}
		}
		r.calls = forced
		if len(r.calls) == 0 {
			r.calls = []call{sampleCall(t)}
		}
	}
}

// sampleCall is a call of t with a deterministic input valid for its schema.
func sampleCall(t engine.ToolInfo) call {
	v := sample(t.InputSchema)
	if _, ok := v.(map[string]any); !ok {
		v = map[string]any{}
	}
	input, _ := json.Marshal(v)
	return call{name: t.Name, input: input}
}

// applyOutput makes the final answer (a reply without tool calls) the
// structured output JSON when the request asks for it: the rule's output,
// or a deterministic value built from the schema.
func (r *reply) applyOutput(req *engine.ModelRequest) {
	if req.Output == nil || len(r.calls) > 0 {
		return
	}
	v := r.output
	if v == nil {
		v = sample(req.Output.Schema)
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	r.text = string(b)
}

// reply picks the answer to req: the first matching rule, or the default.
func (s *Script) reply(req *engine.ModelRequest) *reply {
	userText := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == engine.RoleUser {
			userText = req.Messages[i].Text()
			break
		}
	}
	var results []engine.ContentPart
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == engine.RoleTool {
		for _, c := range req.Messages[n-1].Content {
			if c.Type == engine.ContentToolResult {
				results = append(results, c)
			}
		}
	}
	for _, r := range s.rules {
		if vars, ok := r.match(userText, results); ok {
			return r.render(vars)
		}
	}
	if results != nil {
		lines := make([]string, len(results))
		for i, c := range results {
			verb := "returned"
			if c.IsError {
				verb = "failed"
			}
			lines[i] = fmt.Sprintf("The %s tool %s: %s", c.ToolName, verb, outputText(c.Output))
		}
		return &reply{rule: "default", text: strings.Join(lines, "\n")}
	}
	return &reply{rule: "default", text: "Echo: " + userText}
}

// outputText is a tool output as text: a JSON string unquoted, anything
// else as compact JSON.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// match reports whether r answers this request, with its template variables.
// User rules answer a user message, tool-result rules a tool message
// (results is nil unless the last message carries tool results).
func (r *rule) match(userText string, results []engine.ContentPart) (map[string]string, bool) {
	vars := map[string]string{"text": userText}
	if r.tool != nil {
		for _, c := range results {
			out := outputText(c.Output)
			if (r.tool.tool == "" || r.tool.tool == c.ToolName) && strings.Contains(out, r.tool.contains) {
				vars["tool"], vars["output"] = c.ToolName, out
				return vars, true
			}
		}
		return nil, false
	}
	if results != nil {
		return nil, false
	}
	m := r.user
	switch {
	case m.re != nil:
		groups := m.re.FindStringSubmatch(userText)
		if groups == nil {
			return nil, false
		}
		for i, g := range groups {
			vars[fmt.Sprint(i)] = g
		}
		for i, name := range m.re.SubexpNames() {
			if name != "" {
				vars[name] = groups[i]
			}
		}
		return vars, true
	case m.exact != "":
		return vars, userText == m.exact
	default:
		return vars, strings.Contains(userText, m.contains)
	}
}

// render fills the rule's templates with vars.
func (r *rule) render(vars map[string]string) *reply {
	lookup := func(s string) string {
		return expand(s, func(name string) string { return vars[name] })
	}
	out := &reply{rule: r.name, reasoning: lookup(r.reasoning), text: lookup(r.text)}
	for _, c := range r.calls {
		input, _ := json.Marshal(walkStrings(c.input, lookup))
		out.calls = append(out.calls, call{name: c.name, input: input})
	}
	if r.output != nil {
		out.output = walkStrings(r.output, lookup)
	}
	return out
}

// Provider is an engine model provider.
var _ engine.Provider = (*Provider)(nil)
