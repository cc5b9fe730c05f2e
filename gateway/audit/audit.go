// Package audit writes turngate's audit log: one JSON line per policy
// decision record and per turn outcome, to stdout or to a size-rotated file,
// with configured field paths redacted.
package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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
)

// Redacted replaces the value of every redacted field.
const Redacted = "[REDACTED]"

// Turn is the audit record of one turn's outcome.
type Turn struct {
	Time         time.Time           `json:"time"`
	RequestID    string              `json:"requestId"`
	Tenant       string              `json:"tenant"`
	Subject      string              `json:"subject,omitempty"`
	SessionID    string              `json:"sessionId"`
	Agent        string              `json:"agent"`
	EntryPath    string              `json:"entryPath"`
	Revision     string              `json:"revision"`
	Status       string              `json:"status"`
	FinishReason string              `json:"finishReason,omitempty"`
	Error        string              `json:"error,omitempty"`
	Steps        int                 `json:"steps"`
	ToolCalls    []engine.ToolResult `json:"toolCalls,omitempty"`
	Usage        engine.Usage        `json:"usage"`
	DurationMs   float64             `json:"durationMs"`
}

// Log is the audit log. It implements policy.Recorder and is safe for
// concurrent use. A write failure is logged once per Log and otherwise
// ignored: auditing never fails a turn.
type Log struct {
	mu      sync.Mutex
	w       io.Writer
	closer  io.Closer
	redact  [][]string
	logger  *slog.Logger
	errOnce sync.Once
}

// New returns a Log writing to w, redacting the dotted field paths of
// redact ("*" matches any key or array element).
func New(w io.Writer, redact []string, logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.Default()
	}
	l := &Log{w: w, logger: logger}
	for _, p := range redact {
		l.redact = append(l.redact, strings.Split(p, "."))
	}
	return l
}

// Open returns the Log cfg configures: stdout, a rotated file, or a Log
// that discards everything (sink "none").
func Open(cfg config.Audit, stdout io.Writer, logger *slog.Logger) (*Log, error) {
	switch cfg.Sink {
	case config.SinkStdout, "":
		return New(stdout, cfg.Redact, logger), nil
	case config.SinkNone:
		return New(io.Discard, nil, logger), nil
	case config.SinkFile:
		f := &lumberjack.Logger{Filename: cfg.Path, MaxSize: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups}
		l := New(f, cfg.Redact, logger)
		l.closer = f
		return l, nil
	}
	return nil, fmt.Errorf("opening audit log: unknown sink %q", cfg.Sink)
}

// Record writes one policy decision record.
func (l *Log) Record(r *policy.Record) { l.write(KindDecision, r) }

// Turn writes one turn outcome.
func (l *Log) Turn(t *Turn) { l.write(KindTurn, t) }

// Close closes a file sink.
func (l *Log) Close() error {
	if l.closer == nil {
		return nil
	}
	return l.closer.Close()
}

func (l *Log) write(kind string, v any) {
	line, err := l.encode(kind, v)
	if err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	_, err = l.w.Write(line)
	l.mu.Unlock()
	if err != nil {
		l.fail(err)
	}
}

func (l *Log) fail(err error) {
	l.errOnce.Do(func() { l.logger.Error("writing audit log", "err", err) })
}

// encode renders v as one JSON line with its fields, at every level, in
// key order, "kind" among them, and the redactions applied. Without
// redactions v is marshalled once and its members reordered in place.
func (l *Log) encode(kind string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding audit %s: %w", kind, err)
	}
	if len(l.redact) == 0 {
		kindKey := []byte(`"kind"`)
		line := appendSorted(make([]byte, 0, len(raw)+len(kind)+16), raw,
			&member{key: kindKey, sortKey: kindKey[1:5], val: []byte(`"` + kind + `"`)})
		return append(line, '\n'), nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
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
