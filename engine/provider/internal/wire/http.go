package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/sameorigin"
)

// MaxErrorBodyBytes bounds how much of an error response is read: enough
// for any real error object, not enough for a hostile server to hurt.
const MaxErrorBodyBytes = 64 << 10

// maxMessageBytes bounds an error message kept from a body that is not an
// error object.
const maxMessageBytes = 512

// Request is one streaming POST to a model API.
type Request struct {
	Client *http.Client
	URL    string
	// Header holds the API's own headers (authentication, version). Post
	// adds the JSON and event-stream content types.
	Header http.Header
	// Overrides are applied over Header in order, later ones winning: the
	// provider's configured headers, then the model request's.
	Overrides []map[string]string
	Body      []byte
	// HeaderTimeout bounds the wait for the response headers; zero means
	// none. The body is not bounded: the engine's chunk timeout covers it.
	HeaderTimeout time.Duration
}

// Response is the body of a successful streaming response. Close releases
// the connection and the request's context.
type Response struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	// secrets are the request's credentials, removed from error texts.
	secrets []string
}

// Read reads the body.
func (r *Response) Read(p []byte) (int, error) { return r.body.Read(p) }

// Close closes the body and ends the request's context.
func (r *Response) Close() error {
	err := r.body.Close()
	r.cancel()
	return err
}

// Post sends req. A non-2xx response becomes an *engine.UpstreamError with
// the status, whether a retry may succeed, the server's Retry-After and the
// error body's message; so does a transport failure (status 0, retryable).
// A cancelled ctx returns ctx's error.
func Post(ctx context.Context, req Request) (*Response, error) {
	reqCtx, cancel := context.WithCancel(ctx)
	httpReq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		cancel()
		return nil, &engine.UpstreamError{Message: "building request: " + err.Error()}
	}
	httpReq.Header = streamHeader(req)
	var timer *time.Timer
	if req.HeaderTimeout > 0 {
		timer = time.AfterFunc(req.HeaderTimeout, cancel)
	}
	// Redirects stay on the API's origin: its key and the conversation
	// never go to another host.
	resp, err := sameorigin.Client(req.Client).Do(httpReq)
	// Stop reports false once the timer has fired and cancelled the request.
	timedOut := timer != nil && !timer.Stop()
	if err == nil && timedOut {
		resp.Body.Close()
		err = context.Canceled
	}
	if err != nil {
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case timedOut:
			return nil, &engine.UpstreamError{Retryable: true, Message: "no response headers within " + req.HeaderTimeout.String()}
		}
		return nil, &engine.UpstreamError{Retryable: true, Message: "sending request: " + redactURLError(err).Error()}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes))
		e := StatusError(resp.StatusCode, resp.Header, body)
		e.Message = Redact(e.Message, credentials(httpReq.Header))
		return nil, e
	}
	return &Response{body: resp.Body, cancel: cancel, secrets: credentials(httpReq.Header)}, nil
}

// credentialHeaders carry API keys; their values never appear in errors.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key"}

// credentials returns the credential values of h (a bearer token without
// its scheme), so an upstream that echoes a key in its error body cannot
// put it in logs.
func credentials(h http.Header) []string {
	var out []string
	for _, k := range credentialHeaders {
		v := strings.TrimSpace(h.Get(k))
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			v = strings.TrimSpace(token)
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Redact replaces every secret in s with "[REDACTED]".
func Redact(s string, secrets []string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "[REDACTED]")
	}
	return s
}

// streamHeader returns the headers of req: the content types, the API's
// headers, then the overrides.
func streamHeader(req Request) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	for k, vs := range req.Header {
		h[k] = slices.Clone(vs)
	}
	for _, o := range req.Overrides {
		for k, v := range o {
			h.Set(k, v)
		}
	}
	return h
}

// Open posts req and returns its response as a stream decoded by handler.
// Failures before the stream starts are Post's.
func Open(ctx context.Context, req Request, handler Handler) (engine.Stream, error) {
	resp, err := Post(ctx, req)
	if err != nil {
		return nil, err
	}
	return NewStream(ctx, resp, handler), nil
}

// StatusError builds the UpstreamError of a failed HTTP response.
func StatusError(status int, h http.Header, body []byte) *engine.UpstreamError {
	e := &engine.UpstreamError{Status: status, Retryable: RetryableStatus(status), RetryAfter: RetryAfter(h), Message: ErrorMessage(body),
		ContextOverflow: ContextOverflow(status, body)}
	switch strings.ToLower(h.Get("x-should-retry")) {
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// ContextOverflow reports whether a failed response rejects a request
// for not fitting the model's context window: OpenAI's error code
// context_length_exceeded, Anthropic's invalid_request_error "prompt is
// too long" (and its 413 request_too_large).
func ContextOverflow(status int, body []byte) bool {
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		return false
	}
	var obj struct {
		Error struct {
			Code    string `json:"code"`
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	e := obj.Error
	return e.Code == "context_length_exceeded" || e.Type == "request_too_large" ||
		(e.Type == "invalid_request_error" && strings.HasPrefix(strings.ToLower(e.Message), "prompt is too long"))
}

// RetryableStatus reports whether the official SDKs retry a status: 408,
// 409, 429 and every 5xx (Anthropic's 529 "overloaded" included).
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// RetryAfter reads the server's requested delay: retry-after-ms
// (milliseconds, OpenAI and Anthropic), else retry-after (seconds or an
// HTTP date). Zero when absent or unparsable.
func RetryAfter(h http.Header) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// ErrorMessage extracts the message of an error body. Both APIs nest it:
// OpenAI {"error":{"message","type","code"}}, Anthropic {"type":"error",
// "error":{"type","message"}}. The type, when present, prefixes the
// message. A body that is not an error object is returned as text, cut.
func ErrorMessage(body []byte) string {
	var obj struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &obj) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		if json.Unmarshal(obj.Error, &inner) == nil && (inner.Message != "" || inner.Type != "") {
			if inner.Type != "" && inner.Message != "" {
				return inner.Type + ": " + inner.Message
			}
			return inner.Type + inner.Message
		}
		var s string
		if json.Unmarshal(obj.Error, &s) == nil && s != "" {
			return s
		}
		if obj.Message != "" {
			return obj.Message
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > maxMessageBytes {
		text = text[:maxMessageBytes] + "…"
	}
	return text
}

// RetryableErrorType reports whether an in-stream error type is transient.
func RetryableErrorType(typ string) bool {
	switch typ {
	case "server_error", "api_error", "overloaded_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}
