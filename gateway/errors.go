package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/store"
)

// Stable error codes of the JSON error body {"code","message"}.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidRequest   = "invalid_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeAgentNotFound    = "agent_not_found"
	CodeConflict         = "conflict"
	CodeTooLarge         = "request_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeTooManyQueued    = "too_many_queued_turns"
	CodeTooManyRequests  = "too_many_requests"
	CodeQueueFull        = "too_many_queued_submissions"
	CodeUnavailable      = "unavailable"
	CodeStoreUnavailable = "store_unavailable"
	CodeInternal         = "internal_error"
	CodeRulesInvalid     = "rules_invalid"
	CodeUnsupportedType  = "unsupported_media_type"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInvalidBody      = "invalid_body"
	// CodePersistRulesFailed: the beforePersist rules failed on a message,
	// which was therefore not stored.
	CodePersistRulesFailed = "persist_rules_failed"
)

// storeRetryAfter is the Retry-After of a 503 store_unavailable.
const storeRetryAfter = 2 * time.Second

// apiError is an error with the HTTP status and code the client sees.
// Message is safe to show; internals never go in it.
type apiError struct {
	Status  int
	Code    string
	Message string
	// Details is extra JSON for the body's "errors" key (rule diagnostics).
	Details any
	// Pointer, when set, is the JSON pointer of the offending value in the
	// request body (the body's "pointer" key): a custom body field, or a
	// file part.
	Pointer string
	// Param, when set, is the offending field's JSON path
	// ("messages[0].content"): the OpenAI error body's param.
	Param string
	// QueryParam, when set, names the offending query parameter (the
	// body's "param" key).
	QueryParam string
	// RetryAfter, when positive, is sent as Retry-After (whole seconds,
	// rounded up) and retry-after-ms.
	RetryAfter time.Duration
	// Retryable marks an error a retry may fix (the OpenAI endpoint's
	// x-should-retry).
	Retryable bool
	// Headers are more response headers (a quota's x-ratelimit-*).
	Headers map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errBadRequest is a 400 invalid_request error.
func errBadRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

// errSessionNotFound answers every request for a session the caller's
// tenant does not own, so another tenant's sessions are indistinguishable
// from missing ones.
var errSessionNotFound = &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "session not found"}

// handlerFunc is a gin handler that returns its error; handle maps it.
type handlerFunc func(c *gin.Context) error

// errorFormatKey marks a route whose errors use the OpenAI or the
// Anthropic error body.
const errorFormatKey = "turngate.errorFormat"

const formatOpenAI = "openai"

// handle adapts h to gin, sending its error through writeError.
func (s *Server) handle(h handlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.writeError(c, err)
		}
	}
}

// toAPIError classifies err.
func toAPIError(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var qfe *store.QueueFullError
	if ae := admissionError(err); ae != nil {
		return ae
	}
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, store.ErrNotFound):
		return errSessionNotFound
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, CodeConflict, "the request conflicts with the stored session")
	case errors.Is(err, errQueueFull):
		ae := errorf(http.StatusTooManyRequests, CodeTooManyQueued,
			"too many turns are queued for this session; retry when the current turn has finished")
		ae.RetryAfter = time.Second
		return ae
	case errors.As(err, &qfe):
		ae := errorf(http.StatusTooManyRequests, CodeQueueFull,
			"the %s already has %d queued submissions; retry when some have run, or drop them", qfe.Scope, qfe.Limit)
		ae.RetryAfter = submissionQueueRetry
		return ae
	case errors.Is(err, store.ErrFenced):
		ae := errorf(http.StatusServiceUnavailable, CodeUnavailable,
			"another replica took this session's turn over; retry")
		ae.RetryAfter = time.Second
		return ae
	case errors.Is(err, store.ErrUnavailable):
		ae := errorf(http.StatusServiceUnavailable, CodeStoreUnavailable,
			"the gateway's store is unavailable; retry")
		ae.RetryAfter, ae.Retryable = storeRetryAfter, true
		return ae
	case errors.Is(err, errShuttingDown):
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the gateway is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the request was cancelled")
	}
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

// writeError is the one place errors become responses. It logs once: 5xx
// at error level with the underlying error, 4xx at debug, and so is a
// request cancelled because its client left (nobody reads its answer, and
// nothing failed on this side).
func (s *Server) writeError(c *gin.Context, err error) {
	ae := toAPIError(err)
	level := slog.LevelDebug
	if ae.Status >= 500 && !clientLeft(c, err) {
		level = slog.LevelError
	}
	s.log.Log(c.Request.Context(), level, "request failed", "method", c.Request.Method, "path", c.FullPath(),
		"status", ae.Status, "code", ae.Code, "requestId", requestID(c), "err", err)
	if c.Writer.Written() {
		return // a stream already started; the error is in the stream
	}
	for k, v := range ae.Headers {
		c.Header(k, v)
	}
	switch c.GetString(errorFormatKey) {
	case formatOpenAI:
		writeOpenAIError(c, ae)
		return
	case formatAnthropic:
		writeAnthropicError(c, ae)
		return
	}
	body := gin.H{"code": ae.Code, "message": ae.Message}
	if ae.Details != nil {
		body["errors"] = ae.Details
	}
	if ae.Code == CodeInvalidBody || ae.Pointer != "" {
		body["pointer"] = ae.Pointer
	}
	if ae.QueryParam != "" {
		body["param"] = ae.QueryParam
	}
	setRetryAfter(c, ae.RetryAfter)
	c.AbortWithStatusJSON(ae.Status, body)
}

// clientLeft reports whether err is the cancellation of c's request by its
// client, which closed the connection.
func clientLeft(c *gin.Context, err error) bool {
	return errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil
}

// setRetryAfter sets Retry-After (whole seconds, rounded up) and OpenAI's
// and Anthropic's retry-after-ms when d is positive.
func setRetryAfter(c *gin.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	c.Header("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	c.Header("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// recovery replaces gin's recovery: a panic is logged with its value and
// answered with a plain internal error, never a stack trace.
func (s *Server) recovery() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.writeError(c, fmt.Errorf("handler panic: %v", r))
				c.Abort()
			}
		}()
		c.Next()
	}
}
