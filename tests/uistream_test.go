package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// This file reads an AI SDK UI message stream (protocols.md A.3–A.5) and
// checks it against the rules the `ai` client enforces or relies on. Every
// end-to-end test reads its streams through it, so a protocol slip anywhere
// in the gateway fails the test that provoked it.

// maxSSELine bounds one SSE line, so a broken server cannot make the reader
// buffer without end. A tool output of a few hundred kilobytes still fits.
const maxSSELine = 4 << 20

// sseReader splits a text/event-stream body into events and returns each
// event's data (its data lines joined with "\n"). Comments, event names, ids
// and retry fields are skipped, as the `ai` client's eventsource-parser does.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event's data; io.EOF at the clean end of the body.
// An event cut off by the end of the body is still returned.
func (s *sseReader) next() (string, error) {
	var data []string
	seen := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && seen {
				return strings.Join(data, "\n"), nil
			}
			return "", err
		}
		switch {
		case line == "":
			if seen {
				return strings.Join(data, "\n"), nil
			}
		case strings.HasPrefix(line, ":"):
			// a comment (keep-alive)
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if field == "data" {
				data = append(data, value)
				seen = true
			}
		}
	}
}

// readLine reads one line without its CR, LF or CRLF ending.
func (s *sseReader) readLine() (string, error) {
	var buf []byte
	for {
		part, err := s.r.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > maxSSELine {
			return "", fmt.Errorf("sse line longer than %d bytes", maxSSELine)
		}
		switch {
		case err == nil:
			return strings.TrimRight(string(buf), "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return strings.TrimRight(string(buf), "\r\n"), nil
		default:
			return "", err
		}
	}
}

// chunk is one UI message stream chunk.
type chunk struct {
	Type string
	// Raw is the chunk's JSON as sent.
	Raw json.RawMessage
	// Fields is the chunk decoded as an object.
	Fields map[string]any
}

// str returns the string field name, or "".
func (c chunk) str(name string) string {
	s, _ := c.Fields[name].(string)
	return s
}

// rawField returns field name as JSON, or nil when absent.
func (c chunk) rawField(name string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Raw, &m) != nil {
		return nil
	}
	return m[name]
}

// chunkTypes are the chunk types the `ai` client's schema accepts
// (ui-message-chunks.ts), besides data-<name>. Any other type fails the
// client's validation and with it the whole stream.
var chunkTypes = map[string]bool{
	"start": true, "start-step": true, "finish-step": true, "reset-step": true,
	"text-start": true, "text-delta": true, "text-end": true,
	"reasoning-start": true, "reasoning-delta": true, "reasoning-end": true,
	"tool-input-start": true, "tool-input-delta": true, "tool-input-available": true, "tool-input-error": true,
	"tool-approval-request": true, "tool-approval-response": true,
	"tool-output-available": true, "tool-output-error": true, "tool-output-denied": true,
	"source-url": true, "source-document": true, "file": true, "reasoning-file": true,
	"custom": true, "steering-message": true,
	"message-metadata": true, "finish": true, "abort": true, "error": true,
}

// finishReasons are the finishReason values the client's schema accepts.
var finishReasons = []string{"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}

// requiredFields lists, per chunk type, the fields that must be present and
// whether each must be a string.
var requiredFields = map[string][]struct {
	name     string
	isString bool
}{
	"text-start":            {{"id", true}},
	"text-delta":            {{"id", true}, {"delta", true}},
	"text-end":              {{"id", true}},
	"reasoning-start":       {{"id", true}},
	"reasoning-delta":       {{"id", true}, {"delta", true}},
	"reasoning-end":         {{"id", true}},
	"tool-input-start":      {{"toolCallId", true}, {"toolName", true}},
	"tool-input-delta":      {{"toolCallId", true}, {"inputTextDelta", true}},
	"tool-input-available":  {{"toolCallId", true}, {"toolName", true}, {"input", false}},
	"tool-input-error":      {{"toolCallId", true}, {"toolName", true}, {"errorText", true}},
	"tool-approval-request": {{"approvalId", true}, {"toolCallId", true}},
	"tool-output-available": {{"toolCallId", true}, {"output", false}},
	"tool-output-error":     {{"toolCallId", true}, {"errorText", true}},
	"tool-output-denied":    {{"toolCallId", true}},
	"error":                 {{"errorText", true}},
	"message-metadata":      {{"messageMetadata", false}},
}

// toolCallState is what the checker knows about one tool call.
type toolCallState int

const (
	toolStreaming toolCallState = iota + 1 // tool-input-start seen
	toolInput                              // input available (or input error)
	toolOutput                             // output, error or denial seen
)

// uiChecker validates chunks one at a time, collecting every violation.
type uiChecker struct {
	chunks    int
	started   bool
	inStep    bool
	finished  bool // a finish or abort chunk was seen
	done      bool
	text      map[string]bool
	reasoning map[string]bool
	tools     map[string]toolCallState
	errs      []error
}

// newUIChecker returns a checker. known are tool call ids the message
// already holds (a continuation), whose outputs the stream may carry.
func newUIChecker(known ...string) *uiChecker {
	c := &uiChecker{text: map[string]bool{}, reasoning: map[string]bool{}, tools: map[string]toolCallState{}}
	for _, id := range known {
		c.tools[id] = toolInput
	}
	return c
}

func (c *uiChecker) failf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("chunk %d: "+format, append([]any{c.chunks}, args...)...))
}

// add checks one event's data and returns the chunk it holds (ok false for
// [DONE] and for data that is not a chunk object).
func (c *uiChecker) add(data string) (chunk, bool) {
	c.chunks++
	if c.done {
		c.failf("%q after [DONE]", truncate(data))
		return chunk{}, false
	}
	if data == "[DONE]" {
		c.done = true
		if !c.finished {
			c.failf("[DONE] before any finish or abort chunk")
		}
		return chunk{}, false
	}
	ch := chunk{Raw: json.RawMessage(data)}
	if err := json.Unmarshal(ch.Raw, &ch.Fields); err != nil || ch.Fields == nil {
		c.failf("data is not a JSON object: %q", truncate(data))
		return chunk{}, false
	}
	typ, ok := ch.Fields["type"].(string)
	if !ok {
		c.failf("no string type in %s", truncate(data))
		return chunk{}, false
	}
	ch.Type = typ
	c.check(ch)
	return ch, true
}

// check applies the ordering rules to ch.
func (c *uiChecker) check(ch chunk) {
	if !chunkTypes[ch.Type] && !strings.HasPrefix(ch.Type, "data-") {
		c.failf("unknown chunk type %q (the client's schema rejects it)", ch.Type)
		return
	}
	for _, f := range requiredFields[ch.Type] {
		v, ok := ch.Fields[f.name]
		if _, isString := v.(string); !ok || (f.isString && !isString) {
			c.failf("%s without %s field %q: %s", ch.Type, kindOf(f.isString), f.name, truncate(string(ch.Raw)))
			return
		}
	}
	if ch.Type != "start" && !c.started {
		c.failf("%s before start (start must come first)", ch.Type)
	}
	if c.finished {
		c.failf("%s after the stream's finish or abort", ch.Type)
	}
	id, callID := ch.str("id"), ch.str("toolCallId")
	switch ch.Type {
	case "start":
		if c.started {
			c.failf("a second start")
		}
		c.started = true
	case "start-step":
		if c.inStep {
			c.failf("start-step inside an open step")
		}
		c.inStep = true
	case "finish-step":
		if !c.inStep {
			c.failf("finish-step without start-step")
		}
		c.inStep = false
	case "text-start", "reasoning-start":
		open := c.blocks(ch.Type)
		if open[id] {
			c.failf("%s for %q which is already open", ch.Type, id)
		}
		open[id] = true
	case "text-delta", "reasoning-delta":
		if !c.blocks(ch.Type)[id] {
			c.failf("%s for %q outside its start/end", ch.Type, id)
		}
	case "text-end", "reasoning-end":
		open := c.blocks(ch.Type)
		if !open[id] {
			c.failf("%s for %q which is not open", ch.Type, id)
		}
		delete(open, id)
	case "tool-input-start":
		if _, ok := c.tools[callID]; ok {
			c.failf("tool-input-start for %q which already exists", callID)
		}
		c.tools[callID] = toolStreaming
	case "tool-input-delta":
		if c.tools[callID] != toolStreaming {
			c.failf("tool-input-delta for %q without an open tool-input-start", callID)
		}
	case "tool-input-available", "tool-input-error":
		if st, ok := c.tools[callID]; ok && st != toolStreaming {
			c.failf("%s for %q whose input is already complete", ch.Type, callID)
		}
		c.tools[callID] = toolInput
	case "tool-approval-request":
		if c.tools[callID] != toolInput {
			c.failf("tool-approval-request for unknown or unfinished tool call %q", callID)
		}
	case "tool-output-available", "tool-output-error", "tool-output-denied":
		switch c.tools[callID] {
		case toolInput:
		case toolOutput:
			c.failf("%s for %q which already has its output", ch.Type, callID)
		default:
			c.failf("%s for unknown tool call %q (the client fails the stream)", ch.Type, callID)
		}
		if preliminary, _ := ch.Fields["preliminary"].(bool); !preliminary {
			c.tools[callID] = toolOutput
		}
	case "finish":
		c.checkFinish(ch)
	case "abort":
		// The `ai` server ends an aborted stream with abort instead of
		// finish (stream-text.ts); open parts may stay open.
		c.finished = true
	}
}

// checkFinish checks the finish chunk: a valid reason, and (unless the turn
// failed or was cut short) nothing left open.
func (c *uiChecker) checkFinish(ch chunk) {
	c.finished = true
	reason, present := ch.Fields["finishReason"]
	if !present {
		return
	}
	r, _ := reason.(string)
	if !slices.Contains(finishReasons, r) {
		c.failf("finish with invalid finishReason %v (want one of %v)", reason, finishReasons)
		return
	}
	if r == "error" || r == "interrupted" || r == "other" {
		return
	}
	if c.inStep {
		c.failf("finish %q inside an open step", r)
	}
	for _, open := range []map[string]bool{c.text, c.reasoning} {
		for id := range open {
			c.failf("finish %q with text or reasoning part %q still open", r, id)
		}
	}
}

// blocks returns the open set for a text-* or reasoning-* chunk type.
func (c *uiChecker) blocks(typ string) map[string]bool {
	if strings.HasPrefix(typ, "reasoning") {
		return c.reasoning
	}
	return c.text
}

// end checks the end of a complete stream and returns every violation.
func (c *uiChecker) end() error {
	switch {
	case c.chunks == 0:
		c.errs = append(c.errs, errors.New("empty stream"))
	case !c.finished:
		c.errs = append(c.errs, errors.New("stream ended without a finish or abort chunk"))
	case !c.done:
		c.errs = append(c.errs, errors.New("stream ended without data: [DONE]"))
	}
	return errors.Join(c.errs...)
}

func kindOf(isString bool) string {
	if isString {
		return "string"
	}
	return "any"
}

func truncate(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// uiStreamReader reads and checks a UI message stream chunk by chunk.
type uiStreamReader struct {
	sse     *sseReader
	checker *uiChecker
	// Chunks are the chunks read so far.
	Chunks []chunk
}

// newUIStreamReader reads body; known are tool call ids of a continued
// message (see newUIChecker).
func newUIStreamReader(body io.Reader, known ...string) *uiStreamReader {
	return &uiStreamReader{sse: newSSEReader(body), checker: newUIChecker(known...)}
}

// next returns the next chunk; io.EOF after [DONE] or at the end of the
// body. Protocol violations are collected for end, not returned here.
func (r *uiStreamReader) next() (chunk, error) {
	for {
		if r.checker.done {
			return chunk{}, io.EOF
		}
		data, err := r.sse.next()
		if err != nil {
			return chunk{}, err
		}
		if ch, ok := r.checker.add(data); ok {
			r.Chunks = append(r.Chunks, ch)
			return ch, nil
		}
	}
}

// until reads chunks up to and including the first of type typ.
func (r *uiStreamReader) until(typ string) (chunk, error) {
	for {
		ch, err := r.next()
		if err != nil {
			return chunk{}, fmt.Errorf("reading until %s: %w (got %v)", typ, err, (&uiStream{Chunks: r.Chunks}).types())
		}
		if ch.Type == typ {
			return ch, nil
		}
	}
}

// finish reads the rest of the stream and returns it with every protocol
// violation found in the whole stream.
func (r *uiStreamReader) finish() (*uiStream, error) {
	for {
		_, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &uiStream{Chunks: r.Chunks}, fmt.Errorf("reading stream: %w", err)
		}
	}
	// The body must end right after [DONE].
	if r.checker.done {
		if rest, err := r.sse.next(); err == nil {
			r.checker.add(rest)
		}
	}
	return &uiStream{Chunks: r.Chunks}, r.checker.end()
}

// readUIStream reads and checks a complete stream.
func readUIStream(body io.Reader, known ...string) (*uiStream, error) {
	return newUIStreamReader(body, known...).finish()
}

// uiStream is a complete, checked UI message stream.
type uiStream struct {
	Chunks []chunk
}

// types lists the chunk types in order.
func (s *uiStream) types() []string {
	out := make([]string, len(s.Chunks))
	for i, c := range s.Chunks {
		out[i] = c.Type
	}
	return out
}

// first returns the first chunk of type typ.
func (s *uiStream) first(typ string) (chunk, bool) {
	for _, c := range s.Chunks {
		if c.Type == typ {
			return c, true
		}
	}
	return chunk{}, false
}

// messageID is the start chunk's messageId.
func (s *uiStream) messageID() string {
	c, _ := s.first("start")
	return c.str("messageId")
}

// finishReason is the finish chunk's finishReason.
func (s *uiStream) finishReason() string {
	c, _ := s.first("finish")
	return c.str("finishReason")
}

// text is the concatenation of every text delta.
func (s *uiStream) text() string {
	var b strings.Builder
	for _, c := range s.Chunks {
		if c.Type == "text-delta" {
			b.WriteString(c.str("delta"))
		}
	}
	return b.String()
}

// toolCall is one tool call assembled from the stream.
type toolCall struct {
	ID, Name  string
	Input     json.RawMessage
	Output    json.RawMessage
	ErrorText string
	// State is the last tool chunk type seen for the call.
	State string
}

// toolCalls assembles the stream's tool calls in order of appearance.
func (s *uiStream) toolCalls() []*toolCall {
	var order []*toolCall
	byID := map[string]*toolCall{}
	for _, c := range s.Chunks {
		if !strings.HasPrefix(c.Type, "tool-") {
			continue
		}
		id := c.str("toolCallId")
		tc := byID[id]
		if tc == nil {
			tc = &toolCall{ID: id}
			byID[id] = tc
			order = append(order, tc)
		}
		if name := c.str("toolName"); name != "" {
			tc.Name = name
		}
		switch c.Type {
		case "tool-input-available":
			tc.Input = c.rawField("input")
		case "tool-output-available":
			tc.Output = c.rawField("output")
		case "tool-output-error", "tool-input-error":
			tc.ErrorText = c.str("errorText")
		}
		tc.State = c.Type
	}
	return order
}

// toolCall returns the first call of the tool name.
func (s *uiStream) toolCall(name string) (*toolCall, bool) {
	for _, tc := range s.toolCalls() {
		if tc.Name == name {
			return tc, true
		}
	}
	return nil, false
}

// String renders the stream as one chunk per line, for failure messages.
func (s *uiStream) String() string {
	var b bytes.Buffer
	for _, c := range s.Chunks {
		b.Write(c.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}
