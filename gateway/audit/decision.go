package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/turngate/turngate/policy"
)

// appendDecision appends the line of the decision record r, without
// redactions: its members written in key order as they are encoded
// (chainOffsets relies on the order). The evaluated input, most of a
// record's bytes, is copied as the evaluation rendered it (appendInput),
// never reordered; the small nested values (decision, shadow, conflicts) are
// marshalled with their keys in order, as replay compares a recorded
// decision with a new one by its bytes.
//
// It also returns where the chain's members go: prevHash before
// requestId, seq before sessionId (chainOffsets would find the same by
// scanning the line, input included).
func appendDecision(dst []byte, r *policy.Record) ([]byte, chainAt, error) {
	var (
		err error
		at  chainAt
	)
	dst = append(dst, `{"agent":`...)
	dst = appendString(dst, r.Agent)
	if len(r.Conflicts) > 0 {
		if dst, err = appendMarshalled(dst, `,"conflicts":`, r.Conflicts); err != nil {
			return nil, at, err
		}
	}
	if r.Decision != nil {
		if dst, err = appendMarshalled(dst, `,"decision":`, r.Decision); err != nil {
			return nil, at, err
		}
	}
	dst = append(dst, `,"durationUs":`...)
	dst = strconv.AppendInt(dst, r.DurationMicros, 10)
	if r.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendString(dst, r.Error)
	}
	if r.ErrorClass != "" {
		dst = append(dst, `,"errorClass":`...)
		dst = appendString(dst, r.ErrorClass)
	}
	dst = append(dst, `,"hook":`...)
	dst = appendString(dst, r.Hook)
	if len(r.Input) > 0 {
		dst = append(dst, `,"input":`...)
		if dst, err = appendInput(dst, r.Input); err != nil {
			return nil, at, err
		}
	}
	dst = append(dst, `,"kind":"`+KindDecision+`","outcome":`...)
	dst = appendString(dst, r.Outcome)
	dst = append(dst, ',')
	at.prev = len(dst)
	dst = append(dst, `"requestId":`...)
	dst = appendString(dst, r.RequestID)
	dst = append(dst, `,"revision":`...)
	dst = appendString(dst, r.Revision)
	dst = appendStrings(dst, `,"rulesFired":[`, r.RulesFired)
	dst = appendStrings(dst, `,"rulesFiredAt":[`, r.RulesFiredAt)
	dst = append(dst, ',')
	at.seq = len(dst)
	dst = append(dst, `"sessionId":`...)
	dst = appendString(dst, r.SessionID)
	if len(r.SetBy) > 0 {
		if dst, err = appendMarshalled(dst, `,"setBy":`, r.SetBy); err != nil {
			return nil, at, err
		}
	}
	if r.Shadow != nil {
		if dst, err = appendMarshalled(dst, `,"shadow":`, r.Shadow); err != nil {
			return nil, at, err
		}
	}
	if r.StepNumber != nil {
		dst = append(dst, `,"stepNumber":`...)
		dst = strconv.AppendInt(dst, int64(*r.StepNumber), 10)
	}
	dst = append(dst, `,"tenant":`...)
	dst = appendString(dst, r.Tenant)
	if y := r.Time.Year(); y < 0 || y > 9999 {
		return nil, at, fmt.Errorf("time: year %d outside of range [0,9999]", y)
	}
	dst = append(dst, `,"time":"`...)
	dst = r.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	for _, m := range [...]struct{ key, val string }{
		{`,"toolCallId":`, r.ToolCallID}, {`,"toolKind":`, r.ToolKind},
		{`,"toolName":`, r.ToolName}, {`,"toolServer":`, r.ToolServer},
	} {
		if m.val != "" {
			dst = append(dst, m.key...)
			dst = appendString(dst, m.val)
		}
	}
	return append(dst, '}'), at, nil
}

// appendStrings appends key and the array of ss; nothing for none.
func appendStrings(dst []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return dst
	}
	dst = append(dst, key...)
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendInput appends a decision's evaluated input. The rule set's hooks
// render it compact (encoding/json, or the Rego input's own renderer), so
// an object on one line is copied as it is: scanning it again would cost
// a turn more than the rest of its records' encoding. Anything else is
// compacted, which also refuses what is not JSON.
func appendInput(dst, in []byte) ([]byte, error) {
	if in[0] == '{' && in[len(in)-1] == '}' && bytes.IndexByte(in, '\n') < 0 {
		return append(dst, in...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, in); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return buf.Bytes(), nil
}

// appendMarshalled appends key and the JSON of v, its objects' members in
// key order.
func appendMarshalled(dst []byte, key string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s %w", key[2:len(key)-2], err)
	}
	var scratch [sortScratch]member
	dst, _ = appendSorted(append(dst, key...), b, nil, scratch[:0])
	return dst, nil
}

// appendString appends s as encoding/json writes a string: as it is when
// it holds nothing to escape, which is the common case of ids and names.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
