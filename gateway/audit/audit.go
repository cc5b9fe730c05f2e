// Package audit writes turngate's audit log: one JSON line per policy
// decision record, per observed hook (afterToolCall, onStepFinish,
// onChatResponse) and per turn outcome, to stdout or to a size-rotated file,
// with configured field paths redacted.
package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy"
)

// Kinds of audit lines.
const (
	KindDecision = "decision"
	KindTurn     = "turn"
	// The observation hooks' records are named after their hook.
	KindAfterToolCall  = "afterToolCall"
	KindOnStepFinish   = "onStepFinish"
	KindOnChatResponse = "onChatResponse"
)

// Redacted replaces the value of every redacted field.
const Redacted = "[REDACTED]"

// Turn is the audit record of one turn's outcome.
type Turn struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"requestId"`
	Tenant    string    `json:"tenant"`
	Subject   string    `json:"subject,omitempty"`
	SessionID string    `json:"sessionId"`
	Agent     string    `json:"agent"`
	EntryPath string    `json:"entryPath"`
	Revision  string    `json:"revision"`
	// Replica is the id of the gateway replica that ran the turn.
	Replica      string `json:"replica,omitempty"`
	Status       string `json:"status"`
	FinishReason string `json:"finishReason,omitempty"`
	Error        string `json:"error,omitempty"`
	// ErrorClass is a failed turn's error class (engine.ClassifyError).
	ErrorClass string              `json:"errorClass,omitempty"`
	Steps      int                 `json:"steps"`
	ToolCalls  []engine.ToolResult `json:"toolCalls,omitempty"`
	Usage      engine.Usage        `json:"usage"`
	DurationMs float64             `json:"durationMs"`
}

// Identity names the turn an observation record belongs to.
type Identity struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"requestId"`
	Tenant    string    `json:"tenant"`
	SessionID string    `json:"sessionId"`
	Agent     string    `json:"agent"`
}

func identity(now time.Time, id *engine.Identity) Identity {
	return Identity{Time: now, RequestID: id.RequestID, Tenant: id.Principal.Tenant, SessionID: id.SessionID, Agent: id.Agent}
}

// AfterToolCall is the audit record of one tool call's outcome (the
// afterToolCall hook).
type AfterToolCall struct {
	Identity
	ToolName   string  `json:"toolName"`
	ToolCallID string  `json:"toolCallId"`
	StepNumber int     `json:"stepNumber"`
	Success    bool    `json:"success"`
	DurationMs float64 `json:"durationMs"`
	// OutputBytes is the size of the tool's own output (before a
	// toolResult rule rewrote what the model sees); 0 on failure.
	OutputBytes int `json:"outputBytes"`
	// Decision is the beforeToolCall decision (allow, block, substitute, …).
	Decision string `json:"decision"`
	// Executed reports whether the tool ran (not on a block or substitute).
	Executed bool   `json:"executed"`
	Error    string `json:"error,omitempty"`
}

// OnStepFinish is the audit record of one finished model step.
type OnStepFinish struct {
	Identity
	StepNumber      int          `json:"stepNumber"`
	Model           string       `json:"model"`
	FinishReason    string       `json:"finishReason"`
	ToolCallCount   int          `json:"toolCallCount"`
	ToolResultCount int          `json:"toolResultCount"`
	Usage           engine.Usage `json:"usage"`
}

// OnChatResponse is the audit record of a turn's end as onChatResponse
// observes it: completed, error or aborted.
type OnChatResponse struct {
	Identity
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// ErrorClass is a failed turn's error class (engine.ClassifyError).
	ErrorClass   string `json:"errorClass,omitempty"`
	FinishReason string `json:"finishReason,omitempty"`
	Continuation bool   `json:"continuation"`
	Steps        int    `json:"steps"`
}

// Log is the audit log. It implements policy.Recorder and is safe for
// concurrent use. A write failure is logged once per Log and otherwise
// ignored: auditing never fails a turn.
//
// Its records form a hash chain (chain.go): each has a seq and the
// prevHash of the line before it, from a chain-start record New writes.
//
// Decision records and the observation hooks' records are written by the
// Log's writer (queue.go): the hook that hands one over waits for no
// encoding, chaining or I/O. Every other record, a turn's outcome among
// them, is written before its method returns, after everything handed over
// before it.
type Log struct {
	mu sync.Mutex
	chain
	queue
	w       io.Writer
	closer  io.Closer
	redact  [][]string
	logger  *slog.Logger
	errOnce sync.Once
	// now stamps the chain-start and hook records.
	now func() time.Time
	// tap, when set, sees every record the writer writes (SetTap).
	tap atomic.Pointer[Tap]
}

// Tap sees one record the writer has written (or failed to write) to the
// audit log: its kind, the value handed over (a *policy.Record, an
// *AfterToolCall, …) and its line as the log has it, chain members and
// redactions in, without the newline. It runs on the Log's writer, in
// the order of the log, so it must be quick and must not keep line, which
// is valid only during the call.
type Tap func(kind string, v any, line []byte)

// SetTap makes f see every record written from now on (nil: none).
func (l *Log) SetTap(f Tap) {
	if f == nil {
		l.tap.Store(nil)
		return
	}
	l.tap.Store(&f)
}

// New returns a Log writing to w, redacting the dotted field paths of
// redact ("*" matches any key or array element). It writes the
// chain-start record its chain starts from.
func New(w io.Writer, redact []string, logger *slog.Logger) *Log {
	l := newLog(w, redact, logger)
	if err := l.startChain(ChainOpened); err != nil {
		l.fail(err)
	}
	return l
}

func newLog(w io.Writer, redact []string, logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.Default()
	}
	l := &Log{w: w, logger: logger, now: time.Now}
	l.queue.init()
	for _, p := range redact {
		path := strings.Split(p, ".")
		l.redact = append(l.redact, path)
		if path[0] == "decision" {
			// A shadow decision has the enforced decision's shape and can
			// carry the same values (a shadow substitute or patch), so a
			// path under decision covers it too.
			l.redact = append(l.redact, append([]string{"shadow"}, path...))
		}
	}
	return l
}

// Open returns the Log cfg configures: stdout, a rotated file, or a Log
// that discards everything (sink "none"). A file sink appends to the file
// at cfg.Path, its chain-start naming the hash of the file's last line,
// and starts a new chain in every file it rotates to.
func Open(cfg config.Audit, stdout io.Writer, logger *slog.Logger) (*Log, error) {
	switch cfg.Sink {
	case config.SinkStdout, "":
		return New(stdout, cfg.Redact, logger), nil
	case config.SinkNone:
		return New(io.Discard, nil, logger), nil
	case config.SinkFile:
		f := &lumberjack.Logger{Filename: cfg.Path, MaxSize: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups}
		l := newLog(f, cfg.Redact, logger)
		l.closer, l.rotate = f, f.Rotate
		l.maxSize = int64(cmp.Or(cfg.MaxSizeMB, config.DefaultAuditMaxSizeMB)) << 20
		err := l.resume(cfg.Path)
		if err == nil {
			err = l.startChain(ChainOpened)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("opening audit log %s: %w", cfg.Path, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("opening audit log: unknown sink %q", cfg.Sink)
}

// Record hands one policy decision record to the writer. Neither r nor
// what it points to may change afterwards (policy.Recorder).
func (l *Log) Record(r *policy.Record) { l.post(KindDecision, r) }

// Turn writes one turn outcome, after every record handed over before it.
func (l *Log) Turn(t *Turn) { l.write(KindTurn, t) }

// Hooks returns the observer that writes a record for every
// afterToolCall, onStepFinish and onChatResponse.
func (l *Log) Hooks() engine.Hooks { return observer{l: l} }

type observer struct {
	engine.NopHooks
	l *Log
}

func (o observer) AfterToolCall(_ context.Context, rc *engine.ToolCallResultContext) {
	o.l.post(KindAfterToolCall, &AfterToolCall{Identity: identity(o.l.now(), &rc.Identity),
		ToolName: rc.ToolName, ToolCallID: rc.ToolCallID, StepNumber: rc.StepNumber, Success: rc.Success,
		DurationMs: rc.DurationMs, OutputBytes: len(rc.Output), Decision: rc.Decision, Executed: rc.Executed, Error: rc.Error})
}

func (o observer) OnStepFinish(_ context.Context, s *engine.StepResult) {
	o.l.post(KindOnStepFinish, &OnStepFinish{Identity: identity(o.l.now(), &s.Identity),
		StepNumber: s.StepNumber, Model: s.Model, FinishReason: s.FinishReason,
		ToolCallCount: len(s.ToolCalls), ToolResultCount: len(s.ToolResults), Usage: s.Usage})
}

func (o observer) OnChatResponse(_ context.Context, r *engine.ChatResponseResult) {
	o.l.post(KindOnChatResponse, &OnChatResponse{Identity: identity(o.l.now(), &r.Identity),
		Status: r.Status, Error: r.Error, ErrorClass: r.ErrorClass, FinishReason: r.FinishReason, Continuation: r.Continuation, Steps: r.Steps})
}

// Close writes the records handed over and closes a file sink.
func (l *Log) Close() error {
	l.Flush()
	if l.closer == nil {
		return nil
	}
	return l.closer.Close()
}

// write writes one record after everything handed over before it, and
// returns when it is written.
func (l *Log) write(kind string, v any) { l.wait(l.post(kind, v)) }

// writeLine encodes, chains and writes one record; only the writer calls
// it.
func (l *Log) writeLine(kind string, v any) {
	b := lineBufs.Get().(*lineBuf)
	line, at, err := l.encodeChained(b, kind, v)
	if err == nil {
		l.mu.Lock()
		var out []byte
		out, err = l.put(line, at)
		if tap := l.tap.Load(); tap != nil {
			(*tap)(kind, v, out[:len(out)-1])
		}
		l.mu.Unlock()
	}
	b.release(line)
	if err != nil {
		l.fail(err)
	}
}

func (l *Log) fail(err error) {
	l.errOnce.Do(func() { l.logger.Error("writing audit log", "err", err) })
}

// lineBuf is the scratch space of one line: the record as json.Marshal
// writes it, and the line. A writer must not keep the line it is given
// (io.Writer), so buffers are pooled and serve record after record.
type lineBuf struct {
	raw  bytes.Buffer
	enc  *json.Encoder // writes to raw
	line []byte
}

// maxPooledLine is the largest buffer kept for reuse: a turn whose tool
// calls carry big inputs and outputs can make a line of megabytes, and
// pooling that would pin it.
const maxPooledLine = 64 << 10

var lineBufs = sync.Pool{New: func() any { return newLineBuf() }}

func newLineBuf() *lineBuf {
	b := new(lineBuf)
	b.enc = json.NewEncoder(&b.raw)
	return b
}

// release returns b to the pool, keeping line, if encode wrote one, as
// its line buffer.
func (b *lineBuf) release(line []byte) {
	if line != nil {
		b.line = line[:0]
	}
	if b.raw.Cap() > maxPooledLine || cap(b.line) > maxPooledLine {
		return
	}
	lineBufs.Put(b)
}

// encode renders v as one JSON line with its top-level fields in key
// order, "kind" among them, and the redactions applied. A decision record
// without redactions is written in key order as it is encoded
// (appendDecision); other records without redactions are marshalled once
// and their members reordered into b's line buffer, with the members of
// the objects being reordered on the stack; with redactions every level
// is in key order.
func (l *Log) encode(b *lineBuf, kind string, v any) ([]byte, error) {
	line, _, err := l.encodeChained(b, kind, v)
	return line, err
}

// encodeChained is encode, also returning where the line's chain members
// go: appendDecision knows, other lines are scanned (chainOffsets).
func (l *Log) encodeChained(b *lineBuf, kind string, v any) ([]byte, chainAt, error) {
	if r, ok := v.(*policy.Record); ok && len(l.redact) == 0 {
		line, at, err := appendDecision(b.line[:0], r)
		if err != nil {
			return nil, at, fmt.Errorf("encoding audit %s: %w", kind, err)
		}
		return append(line, '\n'), at, nil
	}
	line, err := l.encodeGeneric(b, kind, v)
	if err != nil {
		return nil, chainAt{}, err
	}
	return line, chainOffsets(line), nil
}

// encodeGeneric is encode for everything but a decision record without
// redactions.
func (l *Log) encodeGeneric(b *lineBuf, kind string, v any) ([]byte, error) {
	b.raw.Reset()
	if err := b.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding audit %s: %w", kind, err)
	}
	raw := b.raw.Bytes()
	raw = raw[:len(raw)-1] // Encode ends the value with a newline
	if len(l.redact) == 0 {
		var scratch [sortScratch]member
		kindMember := member{key: kindKey, sortKey: kindKey[1:5], val: quotedKind(kind)}
		line, _ := appendSorted(slices.Grow(b.line[:0], len(raw)+len(kind)+16), raw, &kindMember, scratch[:0])
		return append(line, '\n'), nil
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers stay exact, so a recorded input replays as it was
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("encoding audit %s: %w", kind, err)
	}
	obj["kind"] = kind
	for _, path := range l.redact {
		redact(obj, path)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding audit %s: %w", kind, err)
	}
	return append(out, '\n'), nil
}

// sortScratch is how many object members encode reorders on the stack.
// appendSorted holds the members of the object it writes and of the
// objects around it: with "kind", at most 19 of a decision record's top
// level or 16 of a turn's, plus a few of a decision, a tool call or an
// input inside. Records with more spill to the heap.
const sortScratch = 32

// kindKey is the "kind" member's key.
var kindKey = []byte(`"kind"`)

// Quoted kinds are the "kind" members' values, made once: appendSorted
// may copy its members to the heap, so escape analysis would move a value
// built on encode's stack there too.
var quotedKinds = func() map[string][]byte {
	m := map[string][]byte{}
	for _, k := range []string{KindDecision, KindTurn, KindAfterToolCall, KindOnStepFinish, KindOnChatResponse, KindChainStart} {
		m[k] = []byte(`"` + k + `"`)
	}
	return m
}()

// quotedKind returns kind as a JSON string.
func quotedKind(kind string) []byte {
	if q, ok := quotedKinds[kind]; ok {
		return q
	}
	return []byte(`"` + kind + `"`)
}

// redact replaces the values at path inside v.
func redact(v any, path []string) {
	if len(path) == 0 {
		return
	}
	last := len(path) == 1
	switch node := v.(type) {
	case map[string]any:
		for k, child := range node {
			if path[0] != "*" && path[0] != k {
				continue
			}
			if last {
				node[k] = Redacted
			} else {
				redact(child, path[1:])
			}
		}
	case []any:
		for i, child := range node {
			if path[0] != "*" && path[0] != fmt.Sprint(i) {
				continue
			}
			if last {
				node[i] = Redacted
			} else {
				redact(child, path[1:])
			}
		}
	}
}
