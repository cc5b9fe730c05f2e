package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/turngate/turngate/policy"
)

// MaxLineBytes bounds one line read back from an audit log. The gateway's
// lines are far smaller: a decision record holds one hook's input, which
// the request body limit (limits.maxBodyBytes, 4 MiB by default) bounds.
const MaxLineBytes = 64 << 20

// Reader reads the decision records back from an audit log, skipping the
// other lines (turn records). Every line must be a JSON object; one that
// is not is an error naming its line number.
type Reader struct {
	sc   *bufio.Scanner
	line int
	// Skipped counts the lines that were not decision records.
	Skipped int
}

// NewReader returns a Reader of the audit lines in r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &Reader{sc: sc}
}

// Next returns the next decision record and its line number (1-based). It
// returns io.EOF after the last one. The record's Decision is the raw JSON
// of the line's decision (a json.RawMessage), nil when it has none.
func (r *Reader) Next() (*policy.Record, int, error) {
	for r.sc.Scan() {
		r.line++
		rec, err := ParseLine(r.sc.Bytes())
		if err != nil {
			return nil, r.line, err
		}
		if rec != nil {
			return rec, r.line, nil
		}
		r.Skipped++
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, r.line + 1, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		return nil, r.line + 1, err
	}
	return nil, r.line, io.EOF
}

// decisionLine is a decision record as an audit line holds it: its
// decision kept as raw JSON, so comparing it with another loses nothing.
type decisionLine struct {
	Kind string `json:"kind"`
	policy.Record
	Decision json.RawMessage `json:"decision"`
}

// ParseLine parses one audit line. It returns the decision record of a
// "decision" line, nil for any other JSON object (a turn record, a line
// of another kind) and for a blank line, and an error when the line is
// not a JSON object or its decision record has a field of the wrong type.
func ParseLine(line []byte) (*policy.Record, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("not an audit line (a JSON object): %w", err)
	}
	if head.Kind != KindDecision {
		return nil, nil
	}
	var d decisionLine
	if err := json.Unmarshal(line, &d); err != nil {
		return nil, fmt.Errorf("decision record: %w", err)
	}
	rec := d.Record
	rec.Decision = nil
	if len(d.Decision) > 0 && !bytes.Equal(d.Decision, []byte("null")) {
		rec.Decision = d.Decision
	}
	return &rec, nil
}
