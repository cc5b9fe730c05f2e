// Package httptool runs a tool by sending its JSON input to an HTTP
// endpoint. A 2xx JSON response is the tool's output as is, a 2xx text
// response becomes a JSON string, and anything else (a non-2xx status, a
// transport error, a timeout, an unreadable body) is a tool error: the
// engine records its text (with the start of a non-2xx body) and shows the
// model and the client a generic one.
package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/sameorigin"
	"github.com/turngate/turngate/internal/tracing"
)

// Request headers sent with every call, so that the endpoint can correlate
// the call with the gateway's logs and audit records.
const (
	HeaderRequestID  = "X-Turngate-Request-Id"
	HeaderSessionID  = "X-Turngate-Session-Id"
	HeaderToolCallID = "X-Turngate-Tool-Call-Id"
	// HeaderIdempotencyKey carries engine.ToolExecution.IdempotencyKey:
	// the same value when a call interrupted by a crash is retried (on any
	// replica), so the endpoint can deduplicate it.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// DefaultMaxBodyBytes is the response body cap when none is given: large
// enough for any output a model should see (the engine truncates outputs to
// the tool's MaxOutputBytes, 64 KiB by default), small enough that a
// runaway endpoint cannot exhaust memory.
const DefaultMaxBodyBytes = 1 << 20

// errorBodyBytes is how much of a non-2xx body the error shows: enough for
// an error message, not a whole HTML error page.
const errorBodyBytes = 200

// Config is an http tool's runner configuration (the `http:` block of a
// tool). Header values may reference environment variables as ${NAME}; the
// gateway's config loader expands them before the config reaches Build, so
// secrets stay out of the config file.
type Config struct {
	// URL is the endpoint; http or https.
	URL string `yaml:"url"`
	// Method is the HTTP method (default POST). The JSON input is the body.
	Method string `yaml:"method"`
	// Headers are added to every request.
	Headers map[string]string `yaml:"headers"`
}

// Option configures an Executor.
type Option func(*Executor)

// WithClient sets the HTTP client (default http.DefaultClient). The
// per-call deadline comes from ctx, not from the client; the trace context
// too (tracing.Transport wraps the client's transport). Whatever the
// client, redirects are followed only on the endpoint's origin
// (sameorigin): the configured headers and, on a 307 or 308, the tool's
// input never go to another host.
func WithClient(c *http.Client) Option {
	return func(e *Executor) { e.client = c }
}

// WithMaxBodyBytes caps how much of a response body is read
// (default DefaultMaxBodyBytes). A longer body is cut at the cap and
// returned as a JSON string, which the engine then truncates for the model.
func WithMaxBodyBytes(n int64) Option {
	return func(e *Executor) { e.maxBody = n }
}

// Executor is an engine.Executor that calls an HTTP endpoint.
type Executor struct {
	name    string
	url     string
	method  string
	headers http.Header
	client  *http.Client
	maxBody int64
}

// New returns an Executor for the tool name with cfg, after checking cfg.
func New(name string, cfg Config, opts ...Option) (*Executor, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q: scheme must be http or https", redact(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("url %q: no host", redact(u))
	}
	method := strings.ToUpper(cfg.Method)
	switch method {
	case "":
		method = http.MethodPost
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil, fmt.Errorf("method %q: must be POST, PUT or PATCH (the JSON input is the body)", cfg.Method)
	}
	headers := make(http.Header, len(cfg.Headers))
	for k, v := range cfg.Headers {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("header %q: invalid name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("header %q: value contains a control character", k)
		}
		headers.Set(k, v)
	}
	e := &Executor{
		name:    name,
		url:     u.String(),
		method:  method,
		headers: headers,
		client:  http.DefaultClient,
		maxBody: DefaultMaxBodyBytes,
	}
	for _, o := range opts {
		o(e)
	}
	if e.maxBody <= 0 {
		e.maxBody = DefaultMaxBodyBytes
	}
	e.client = tracing.Client(sameorigin.Client(e.client))
	return e, nil
}

// Execute sends call.Input to the endpoint and maps the response to the
// tool's output or error.
func (e *Executor) Execute(ctx context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	req, err := http.NewRequestWithContext(ctx, e.method, e.url, bytes.NewReader(input))
	if err != nil {
		return nil, e.errorf("building request: %w", err)
	}
	req.Header = e.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.1")
	}
	req.Header.Set(HeaderRequestID, call.RequestID)
	req.Header.Set(HeaderSessionID, call.SessionID)
	req.Header.Set(HeaderToolCallID, call.ToolCallID)
	if call.IdempotencyKey != "" {
		req.Header.Set(HeaderIdempotencyKey, call.IdempotencyKey)
	}

	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.errorf("%w", transportError(ctx, err))
	}
	defer resp.Body.Close()
	body, truncated, err := readCapped(resp.Body, e.maxBody)
	if err != nil {
		return nil, e.errorf("reading response: %w", transportError(ctx, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, e.errorf("status %d: %s", resp.StatusCode, bodySnippet(body))
	}
	return e.output(resp.Header.Get("Content-Type"), body, truncated)
}

// output maps a 2xx body to the tool's output.
func (e *Executor) output(contentType string, body []byte, truncated bool) (json.RawMessage, error) {
	if len(body) == 0 {
		return json.RawMessage("null"), nil
	}
	mediaType := "text/plain"
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return nil, e.errorf("response content type %q: %w", contentType, err)
		}
		mediaType = mt
	}
	isJSON := mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
	switch {
	case isJSON && !truncated:
		if !json.Valid(body) {
			return nil, e.errorf("response is not valid JSON")
		}
		return json.RawMessage(body), nil
	case isJSON, strings.HasPrefix(mediaType, "text/"):
		// A JSON body cut at the cap is no longer JSON; the model sees its
		// start as text, which the engine truncates with a marker.
		s, err := json.Marshal(string(body))
		if err != nil {
			return nil, e.errorf("encoding response: %w", err)
		}
		return s, nil
	default:
		return nil, e.errorf("unsupported response content type %q", mediaType)
	}
}

func (e *Executor) errorf(format string, args ...any) error {
	return fmt.Errorf("http tool %s: "+format, append([]any{e.name}, args...)...)
}

// readCapped reads at most max bytes of r and reports whether r had more.
func readCapped(r io.Reader, max int64) ([]byte, bool, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > max {
		return body[:max], true, nil
	}
	return body, false, nil
}

// transportError strips the URL from a client error (it may carry a
// secret in its query) and names a cancelled or expired call plainly.
func transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("request cancelled: %w", ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s request failed: %w", ue.Op, ue.Err)
	}
	return err
}

// bodySnippet returns the first errorBodyBytes of body as valid UTF-8; a
// rune cut at the end is dropped.
func bodySnippet(body []byte) string {
	if len(body) > errorBodyBytes {
		body = body[:errorBodyBytes]
		for i := len(body) - 1; i >= 0 && i >= len(body)-utf8.UTFMax; i-- {
			if utf8.RuneStart(body[i]) {
				if !utf8.FullRune(body[i:]) {
					body = body[:i]
				}
				break
			}
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
}

// redact returns u without its query and user info, for error messages.
func redact(u *url.URL) string {
	r := *u
	r.User = nil
	r.RawQuery = ""
	return r.String()
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
