package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/uistream"
)

// The OpenAI-compatible endpoint is stateless: the client sends the whole
// history. The gateway runs such a turn on an ephemeral session that is
// never stored, and trusts the history no further than that turn: the
// principal comes from the API key, never from the body, every tool call
// of the turn still goes through beforeToolCall, and the client tool
// results the request brings go through toolResult and afterToolCall
// (statelessPlan).

// oaiRequest is the part of a chat completions request the gateway reads;
// the other fields OpenAI defines (sampling, n, user, …) are accepted and
// ignored. decodeOAIRequest type-checks all of them (oaiShape).
type oaiRequest struct {
	Model         string       `json:"model"`
	Messages      []oaiMessage `json:"messages"`
	Tools         []oaiTool    `json:"tools"`
	Stream        bool         `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type oaiMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaiToolCall   `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type oaiToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// oaiPart is a content part as the gateway reads it.
type oaiPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parts returns a message's content parts: none for a string, null or
// absent content (decodeOAIRequest checked that it is one of them).
func (m oaiMessage) parts() []oaiPart {
	var parts []oaiPart
	_ = json.Unmarshal(m.Content, &parts)
	return parts
}

// text returns a message's content as text: a string, or the text parts of
// an array.
func (m oaiMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var b strings.Builder
	for _, p := range m.parts() {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// files counts a message's file content parts (image_url, input_audio and
// file), which limits.attachments.maxCount bounds though only text is read.
func (m oaiMessage) files() int {
	n := 0
	for _, p := range m.parts() {
		switch p.Type {
		case "image_url", "input_audio", "file":
			n++
		}
	}
	return n
}

// toUIMessages converts an OpenAI history to UI messages.
func (r *oaiRequest) toUIMessages() ([]engine.UIMessage, error) {
	var out []engine.UIMessage
	toolPart := map[string][2]int{} // tool_call_id → (message, part)
	for i, m := range r.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		text := m.text()
		id := fmt.Sprintf("oai_%d", i)
		switch m.Role {
		case "system", "developer":
			out = append(out, engine.UIMessage{ID: id, Role: engine.RoleSystem, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}})
		case "user":
			out = append(out, engine.UIMessage{ID: id, Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}})
		case "assistant":
			msg := engine.UIMessage{ID: id, Role: engine.RoleAssistant, Parts: []engine.UIPart{{Type: engine.PartStepStart}}}
			if text != "" {
				msg.Parts = append(msg.Parts, engine.UIPart{Type: engine.PartText, Text: text, State: engine.StateDone})
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, errField(fmt.Sprintf("%s.tool_calls[%d]", field, j), "id and function.name are required")
				}
				input := json.RawMessage(tc.Function.Arguments)
				if !json.Valid(input) {
					input, _ = json.Marshal(tc.Function.Arguments)
				}
				toolPart[tc.ID] = [2]int{len(out), len(msg.Parts)}
				msg.Parts = append(msg.Parts, engine.UIPart{Type: engine.PartToolPrefix + tc.Function.Name,
					ToolCallID: tc.ID, State: engine.ToolStateInputAvailable, Input: input})
			}
			out = append(out, msg)
		case "tool":
			at, ok := toolPart[m.ToolCallID]
			if !ok {
				return nil, errField(field+".tool_call_id", "names no earlier assistant tool call")
			}
			// A tool's output is JSON or text to the engine: another part
			// of a tool message would be lost.
			for j, part := range m.parts() {
				if part.Type != "text" {
					return nil, errField(fmt.Sprintf("%s.content[%d]", field, j),
						"a tool message's content may hold text parts only, not %s: a tool's output is JSON or text", part.Type)
				}
			}
			output := json.RawMessage(text)
			if !json.Valid(output) {
				output, _ = json.Marshal(text)
			}
			p := &out[at[0]].Parts[at[1]]
			p.State, p.Output = engine.ToolStateOutputAvailable, output
		default:
			return nil, errField(field+".role", "must be system, developer, user, assistant or tool, not %q", m.Role)
		}
	}
	return out, nil
}

// clientTools returns the request's tools as client tools, refusing names
// that shadow the agent's server tools.
func (r *oaiRequest) clientTools(serverTools []engine.Tool) ([]engine.Tool, error) {
	server := map[string]bool{}
	for _, t := range serverTools {
		server[t.Name] = true
	}
	var out []engine.Tool
	for i, t := range r.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, errField(field+".type", "only function tools are supported")
		case t.Function.Name == "":
			return nil, errField(field+".function.name", "is required")
		case server[t.Function.Name]:
			return nil, errField(field+".function.name", "%q is a server tool of this agent", t.Function.Name)
		}
		out = append(out, engine.Tool{ToolInfo: engine.ToolInfo{Name: t.Function.Name, Description: t.Function.Description,
			InputSchema: t.Function.Parameters, Kind: engine.ToolKindClient}})
	}
	return out, nil
}

// chatCompletions serves POST /v1/chat/completions; model names an agent.
func (s *Server) chatCompletions(c *gin.Context) error {
	data, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeOAIRequest(data)
	if err != nil {
		return err
	}
	if req.Model == "" {
		return errField("model", "is required: the name of one of this gateway's agents")
	}
	ag, err := s.oaiAgent(req.Model)
	if err != nil {
		return err
	}
	if len(req.Messages) == 0 {
		return errField("messages", "at least one message is required")
	}
	if len(req.Messages) > s.conf().Limits.MaxMessages {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d messages is more than the limit of %d", len(req.Messages), s.conf().Limits.MaxMessages)
	}
	files := s.fileRules(ag)
	for i, m := range req.Messages {
		if err := files.countFiles(m.files(), fmt.Sprintf("messages[%d].content", i)); err != nil {
			return err
		}
	}
	history, err := req.toUIMessages()
	if err != nil {
		return err
	}
	if l := history[len(history)-1]; l.Role != engine.RoleUser && l.Role != engine.RoleAssistant {
		return errField("messages", "the last message must be a user or tool message")
	}
	tools, err := req.clientTools(s.agentTools(ag))
	if err != nil {
		return err
	}
	enc := newOAIEncoder(req.Model, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	in := &turnInput{
		agent: ag, principal: principal(c), sessionID: newID("oai_"), entry: engine.EntryOpenAI,
		requestID: requestID(c), ephemeral: true, bounded: true, extraTools: tools,
		prepare: statelessPlan(history),
	}
	if !req.Stream {
		return s.answerStateless(c, in, oaiTurnError, func(res *engine.TurnResult) any { return enc.completion(res) })
	}
	in.onEvent = enc.event
	return s.streamStateless(c, in, enc, oaiTurnError, enc.end)
}

// statelessPlan is the prepare of a stateless request's turn: its
// transcript is the history the client sent, and the outputs that history
// brings for the tool calls of its last assistant message — the results
// the client sends back for the calls the previous request ended with,
// new in this request — pass the toolResult hook and afterToolCall before
// the model sees them (engine.TurnRequest.ClientToolResults), as a client
// tool's output does on POST chat. The outputs of earlier assistant
// messages were checked in the request they were new in, and are not
// again: a client that rewrites its history could as well put the same
// text in a user message, which no tool hook reads.
func statelessPlan(history []engine.UIMessage) func(context.Context, *transcript) (*plan, error) {
	var results []string
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role != engine.RoleAssistant {
			continue
		}
		for _, p := range history[i].Parts {
			if p.IsTool() && (p.State == engine.ToolStateOutputAvailable || p.State == engine.ToolStateOutputError) {
				results = append(results, p.ToolCallID)
			}
		}
		break
	}
	return func(_ context.Context, tx *transcript) (*plan, error) {
		tx.messages = history
		return &plan{clientResults: results}, nil
	}
}

// statelessStream is the stream of an ephemeral turn's answer (the OpenAI
// and Anthropic endpoints' encoders).
type statelessStream interface {
	// Content is closed when the first content is encoded.
	Content() <-chan struct{}
	HasContent() bool
	// Buffer holds the frames; the end function closes it.
	Buffer() *uistream.Buffer
}

// answerStateless runs an ephemeral turn and answers it with body, or with
// the failure's answer (statelessFailure) when the turn failed or was cut
// off.
func (s *Server) answerStateless(c *gin.Context, in *turnInput, turnError func(error, string) *apiError, body func(*engine.TurnResult) any) error {
	t, err := s.begin(c.Request.Context(), in)
	if err != nil {
		return err
	}
	if err := t.wait(c.Request.Context()); err != nil {
		t.cancel()
		return err
	}
	if ae := s.statelessFailure(t, turnError); ae != nil {
		return ae
	}
	c.JSON(http.StatusOK, body(t.result))
	return nil
}

// statelessFailure is the answer of an ephemeral turn that did not
// complete, nil for one that did: turnError's for a failed turn; for one
// cut off (limits.turnTimeout, or shutdown, which nobody can resume) a
// 504 turn_timeout, or the 503 of a gateway shutting down — never the 200
// of a complete answer, which a truncated one would pass for.
func (s *Server) statelessFailure(t *turn, turnError func(error, string) *apiError) *apiError {
	switch t.result.Status {
	case engine.StatusError:
		return turnError(t.err, t.result.Error)
	case engine.StatusAborted:
		if s.closing.Load() {
			ae := toAPIError(errShuttingDown)
			ae.Retryable = true
			return ae
		}
		return &apiError{Status: http.StatusGatewayTimeout, Code: "turn_timeout", Retryable: true,
			Message: "The turn did not finish within the gateway's turn timeout."}
	}
	return nil
}

// streamStateless runs an ephemeral turn whose events in.onEvent encodes
// into st, and streams st's frames; end adds the last ones after the turn
// (its result, and statelessFailure's answer when it did not complete).
// The response's status waits for the first content: a turn that fails
// before any (an upstream 429, 5xx or timeout) is answered with its own
// status (turnError's), which the SDKs retry, rather than with a 200
// stream that holds only an error.
func (s *Server) streamStateless(c *gin.Context, in *turnInput, st statelessStream, turnError func(error, string) *apiError, end func(*engine.TurnResult, *apiError)) error {
	t, err := s.begin(c.Request.Context(), in)
	if err != nil {
		return err
	}
	select {
	case <-st.Content():
	case <-t.done:
		if ae := s.statelessFailure(t, turnError); ae != nil && !st.HasContent() {
			return ae
		}
	case <-c.Request.Context().Done():
		t.cancel()
		<-t.done
		return c.Request.Context().Err()
	}
	go func() {
		select {
		case <-t.done:
		case <-c.Request.Context().Done():
			t.cancel() // nobody can resume an ephemeral turn
			<-t.done
		}
		end(t.result, s.statelessFailure(t, turnError))
	}()
	s.metrics.ActiveStreams.Inc()
	defer s.metrics.ActiveStreams.Dec()
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("Connection", "keep-alive")
	c.Status(http.StatusOK)
	_ = st.Buffer().Follow(c.Request.Context(), c.Writer)
	return nil
}

// oaiEncoder translates engine events to chat.completion.chunk frames
// (protocols.md B.1): the role on the first chunk, content deltas, the
// pending client tool calls as tool_calls fragments, finish_reason, the
// usage chunk when asked for, then [DONE].
type oaiEncoder struct {
	id      string
	created int64
	model   string
	usage   bool
	buf     *uistream.Buffer
	// texts counts text blocks seen, to separate blocks of later steps.
	texts   int
	started bool
	// content is closed with the first content delta.
	content     chan struct{}
	contentOnce sync.Once
}

func newOAIEncoder(model string, usage bool) *oaiEncoder {
	return &oaiEncoder{id: newID("chatcmpl-"), created: time.Now().Unix(), model: model, usage: usage,
		buf: uistream.NewBuffer(), content: make(chan struct{})}
}

// Content is closed with the first content delta.
func (e *oaiEncoder) Content() <-chan struct{} { return e.content }

// Buffer holds the stream's frames.
func (e *oaiEncoder) Buffer() *uistream.Buffer { return e.buf }

// HasContent reports whether a content delta was encoded.
func (e *oaiEncoder) HasContent() bool {
	select {
	case <-e.content:
		return true
	default:
		return false
	}
}

// chunk appends one chunk with the given choice delta and finish reason.
func (e *oaiEncoder) chunk(delta map[string]any, finish *string) {
	choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
	e.frame(map[string]any{"choices": []any{choice}})
}

func (e *oaiEncoder) frame(fields map[string]any) {
	fields["id"], fields["object"], fields["created"], fields["model"] = e.id, "chat.completion.chunk", e.created, e.model
	if e.usage {
		if _, ok := fields["usage"]; !ok {
			fields["usage"] = nil
		}
	}
	if f, err := uistream.Frame(fields); err == nil {
		e.buf.Append(f)
	}
}

func (e *oaiEncoder) start() {
	if !e.started {
		e.started = true
		e.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	}
}

// event handles one engine event (called from the turn goroutine).
func (e *oaiEncoder) event(ev engine.Event) {
	e.start()
	switch ev.Type {
	case engine.EventTextStart:
		if e.texts > 0 {
			e.chunk(map[string]any{"content": "\n\n"}, nil)
		}
		e.texts++
	case engine.EventTextDelta:
		if ev.Delta != "" {
			e.chunk(map[string]any{"content": ev.Delta}, nil)
			e.contentOnce.Do(func() { close(e.content) })
		}
	}
}

// end appends the tool calls, finish and usage chunks after the turn, or
// the error object of failed, the answer of a turn that did not complete.
func (e *oaiEncoder) end(res *engine.TurnResult, failed *apiError) {
	defer e.buf.Close()
	e.start()
	if failed != nil {
		e.buf.Append(mustFrame(map[string]any{"error": map[string]any{"message": failed.Message, "type": "server_error", "param": nil, "code": failed.Code}}))
		return
	}
	if note := approvalNotice(res); note != "" {
		if e.HasContent() {
			note = "\n\n" + note
		}
		e.chunk(map[string]any{"content": note}, nil)
	}
	for i, tc := range res.PendingToolCalls {
		e.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ToolCallID, "type": "function",
			"function": map[string]any{"name": tc.ToolName, "arguments": string(tc.Input)}}}}, nil)
	}
	reason := oaiFinishReason(res)
	e.chunk(map[string]any{}, &reason)
	if e.usage {
		e.frame(map[string]any{"choices": []any{}, "usage": oaiUsage(res.Usage)})
	}
}

func mustFrame(v any) []byte {
	f, _ := uistream.Frame(v)
	return f
}

// completion is the non-streaming response.
func (e *oaiEncoder) completion(res *engine.TurnResult) map[string]any {
	var texts []string
	for _, p := range res.Message.Parts {
		if p.Type == engine.PartText && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	if note := approvalNotice(res); note != "" {
		texts = append(texts, note)
	}
	msg := map[string]any{"role": "assistant", "content": strings.Join(texts, "\n\n"), "refusal": nil}
	if len(res.PendingToolCalls) > 0 {
		calls := make([]any, len(res.PendingToolCalls))
		for i, tc := range res.PendingToolCalls {
			calls[i] = map[string]any{"id": tc.ToolCallID, "type": "function",
				"function": map[string]any{"name": tc.ToolName, "arguments": string(tc.Input)}}
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": e.id, "object": "chat.completion", "created": e.created, "model": e.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": oaiFinishReason(res)}},
		"usage":   oaiUsage(res.Usage),
	}
}

func oaiUsage(u engine.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.TotalTokens}
}

// oaiFinishReason maps a turn's end to OpenAI's finish_reason.
func oaiFinishReason(res *engine.TurnResult) string {
	if len(res.PendingToolCalls) > 0 {
		return "tool_calls"
	}
	switch res.FinishReason {
	case engine.FinishLength:
		return "length"
	case engine.FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

// maskedErrorText is the engine's client-visible text of a failed turn
// when no onChatError hook replaced it.
const maskedErrorText = "An error occurred."

// oaiTurnError maps a failed turn to the OpenAI endpoint's answer by the
// error's class (engine.ClassifyError), so that the SDKs retry what a
// retry may fix (API.md has the table):
//
//   - rate_limit (an upstream 429 it may retry): 429 rate_limit_error,
//     with the upstream's Retry-After;
//   - the model's timeout.totalMs or timeout.chunkMs: 504;
//   - transient (an upstream 5xx, 529, 408, 409, a transport error, a
//     retryable error inside the stream): 502, retryable, with the
//     upstream's Retry-After if any;
//   - anything else — fatal (an upstream 4xx such as a bad key, a failure
//     the upstream says not to retry, a policy failure), context_overflow
//     the compaction could not fix, unknown (a tool's own error): 502 with
//     x-should-retry: false.
//
// text is the turn's client-visible error; the masked default is replaced
// by a description of the class, which carries no provider text.
func oaiTurnError(err error, text string) *apiError {
	if ae := refusedError(err); ae != nil {
		return ae
	}
	var ue *engine.UpstreamError
	errors.As(err, &ue)
	ae := &apiError{Status: http.StatusBadGateway, Code: "server_error", Message: text}
	describe := func(what string) {
		if text == maskedErrorText || text == "" {
			ae.Message = what
		}
	}
	// The stage tells fatal from unknown only, which answer alike.
	switch class := engine.ClassifyError("", err); {
	case class == engine.ClassRateLimit:
		ae.Status, ae.Code, ae.Retryable, ae.RetryAfter = http.StatusTooManyRequests, "upstream_rate_limited", true, ue.RetryAfter
		describe("The upstream model is rate limited; retry later.")
	case errors.Is(err, engine.ErrModelTimeout):
		ae.Status, ae.Code, ae.Retryable = http.StatusGatewayTimeout, "upstream_timeout", true
		describe("The upstream model did not answer in time.")
	case class == engine.ClassTransient:
		ae.Code, ae.Retryable = "upstream_unavailable", true
		if ue != nil {
			ae.RetryAfter = ue.RetryAfter
		}
		describe("The upstream model is unavailable; retry later.")
	}
	return ae
}

// writeOpenAIError writes ae as OpenAI's error body. Errors that a retry
// cannot fix carry x-should-retry: false, so the SDKs do not retry them;
// retryable ones carry x-should-retry: true, and Retry-After (seconds)
// with retry-after-ms when the delay is known.
func writeOpenAIError(c *gin.Context, ae *apiError) {
	typ := "invalid_request_error"
	switch {
	case ae.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case ae.Status == http.StatusForbidden:
		typ = "permission_error"
	case ae.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case ae.Status >= 500:
		typ = "server_error"
	}
	if ae.Retryable || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		c.Header("x-should-retry", "true")
	} else {
		c.Header("x-should-retry", "false")
	}
	setRetryAfter(c, ae.RetryAfter)
	var param any
	switch {
	case ae.Param != "":
		param = ae.Param
	case ae.Code == "model_not_found":
		param = "model"
	}
	c.AbortWithStatusJSON(ae.Status, gin.H{"error": gin.H{"message": ae.Message, "type": typ, "param": param, "code": ae.Code}})
}
