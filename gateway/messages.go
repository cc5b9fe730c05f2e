package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/anthropic"
	js "github.com/turngate/turngate/gateway/jsonshape"
)

// The Anthropic Messages endpoint (POST /v1/messages) is stateless like the
// OpenAI one: the client sends the whole history, the gateway runs the
// turn on an ephemeral session (entry path "anthropic"), every rule runs,
// server tools run in the gateway and the request's own tools are client
// tools, returned as tool_use blocks, whose tool_result blocks the next
// request brings pass toolResult and afterToolCall (statelessPlan). The
// wire format is package gateway/anthropic's. A stream answers its 200
// once the model answered (text, thinking or a tool call) and gets a ping
// event whenever it was silent for Options.AnthropicPing, so a slow tool
// does not let a proxy cut it. A user message holds at most
// limits.attachments.maxCount image and document blocks.

const formatAnthropic = "anthropic"

// messages serves POST /v1/messages; model names an agent.
func (s *Server) messages(c *gin.Context) error {
	data, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := anthropic.Decode(data)
	if err != nil {
		return anthropicDecodeError(err)
	}
	ag, err := s.oaiAgent(req.Model)
	if err != nil {
		return err
	}
	if len(req.Messages) > s.conf().Limits.MaxMessages {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d messages is more than the limit of %d", len(req.Messages), s.conf().Limits.MaxMessages)
	}
	files := s.fileRules(ag)
	for i, m := range req.Messages {
		n := 0
		for _, b := range m.Content {
			if b.Type == "image" || b.Type == "document" {
				n++
			}
		}
		if err := files.countFiles(n, fmt.Sprintf("messages[%d].content", i)); err != nil {
			return err
		}
	}
	history, err := req.History(func(p engine.UIPart, field string) (engine.UIPart, error) {
		if err := files.fetchPart(c.Request.Context(), &p, field); err != nil {
			return engine.UIPart{}, err
		}
		return files.filePart(p, field)
	})
	if err != nil {
		return anthropicDecodeError(err)
	}
	serverTools := s.agentTools(ag)
	names := make([]string, len(serverTools))
	for i, t := range serverTools {
		names[i] = t.Name
	}
	tools, choice, err := req.ClientTools(names)
	if err != nil {
		return anthropicDecodeError(err)
	}
	enc := anthropic.NewEncoder(newID("msg_"), req.Model, req.Stream)
	in := &turnInput{
		agent: ag, principal: principal(c), sessionID: newID("ant_"), entry: engine.EntryAnthropic,
		requestID: requestID(c), ephemeral: true, bounded: true, extraTools: tools, toolChoice: choice,
		onEvent: enc.Event,
		prepare: statelessPlan(history),
	}
	if !req.Stream {
		return s.answerStateless(c, in, anthropicTurnError, func(res *engine.TurnResult) any {
			return enc.Message(res, approvalNotice(res))
		})
	}
	go enc.KeepAlive(c.Request.Context(), cmp.Or(s.anthropicPing, anthropic.DefaultPingInterval))
	return s.streamStateless(c, in, enc, anthropicTurnError, func(res *engine.TurnResult, failed *apiError) {
		if failed != nil {
			ae := anthropicStatus(failed)
			enc.Fail(anthropic.ErrorType(ae.Status), ae.Message)
			return
		}
		enc.End(res, approvalNotice(res))
	})
}

// anthropicDecodeError is the 400 of a request anthropic.Decode, History or
// ClientTools refused.
func anthropicDecodeError(err error) error {
	var fe *js.Error
	switch {
	case errors.As(err, &fe):
		return errField(fe.Path, "%s", fe.Message)
	case errors.Is(err, anthropic.ErrBody):
		return errBadRequest("%v", err)
	case errors.As(err, new(*apiError)):
		return err // a file the attachment rules refused
	}
	return jsonError(err)
}

// anthropicTurnError maps a failed turn as oaiTurnError does, with
// Anthropic's statuses: an unavailable upstream is 529 overloaded.
func anthropicTurnError(err error, text string) *apiError {
	return anthropicStatus(oaiTurnError(err, text))
}

// anthropicStatus moves an error onto the statuses Anthropic's clients
// know: a retryable 502 or 503 is 529 overloaded_error, another 5xx is a
// 500 api_error (not retried when not retryable); the others keep theirs.
func anthropicStatus(ae *apiError) *apiError {
	switch {
	case ae.Status == http.StatusGatewayTimeout || ae.Status < 500 || ae.Status == anthropic.StatusOverloaded:
		return ae
	case ae.Retryable && (ae.Status == http.StatusBadGateway || ae.Status == http.StatusServiceUnavailable):
		c := *ae
		c.Status = anthropic.StatusOverloaded
		return &c
	}
	c := *ae
	c.Status = http.StatusInternalServerError
	return &c
}

// writeAnthropicError writes ae as Anthropic's error body (the request-id
// header is the route's, on every response), x-should-retry as for OpenAI and
// Retry-After with retry-after-ms when the delay is known.
func writeAnthropicError(c *gin.Context, ae *apiError) {
	ae = anthropicStatus(ae)
	if ae.Retryable || ae.Status == http.StatusTooManyRequests || ae.Status == anthropic.StatusOverloaded {
		c.Header("x-should-retry", "true")
	} else {
		c.Header("x-should-retry", "false")
	}
	setRetryAfter(c, ae.RetryAfter)
	c.AbortWithStatusJSON(ae.Status, anthropic.ErrorBody(ae.Status, ae.Message, requestID(c)))
}
