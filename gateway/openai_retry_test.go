package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// TestOpenAITurnErrors pins down API.md's table of failed turns on
// /v1/chat/completions: what an OpenAI SDK retries, and after how long.
func TestOpenAITurnErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		text      string
		status    int
		code      string
		retryable bool
		after     time.Duration
		message   string
	}{
		{"upstream rate limit", &engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: 1500 * time.Millisecond, Message: "slow down"}, maskedErrorText,
			http.StatusTooManyRequests, "upstream_rate_limited", true, 1500 * time.Millisecond, "The upstream model is rate limited; retry later."},
		{"model timeout", fmt.Errorf("step 0: %w", engine.ErrModelTimeout), "model stream stalled: no chunk for 5000ms (timeout.chunkMs)",
			http.StatusGatewayTimeout, "upstream_timeout", true, 0, "model stream stalled: no chunk for 5000ms (timeout.chunkMs)"},
		{"upstream 503", fmt.Errorf("step 0: %w", &engine.UpstreamError{Status: 503, Retryable: true}), maskedErrorText,
			http.StatusBadGateway, "upstream_unavailable", true, 0, "The upstream model is unavailable; retry later."},
		{"connection refused", &engine.UpstreamError{Retryable: true, Message: "sending request: connection refused"}, maskedErrorText,
			http.StatusBadGateway, "upstream_unavailable", true, 0, "The upstream model is unavailable; retry later."},
		{"upstream 529 overloaded", &engine.UpstreamError{Status: 529, Retryable: true, RetryAfter: 2 * time.Second, Message: "overloaded_error"}, maskedErrorText,
			http.StatusBadGateway, "upstream_unavailable", true, 2 * time.Second, "The upstream model is unavailable; retry later."},
		{"upstream 429 not to retry", &engine.UpstreamError{Status: 429, Message: "quota exhausted"}, maskedErrorText,
			http.StatusBadGateway, "server_error", false, 0, maskedErrorText},
		{"context overflow", &engine.UpstreamError{Status: 400, ContextOverflow: true, Message: "context_length_exceeded"}, maskedErrorText,
			http.StatusBadGateway, "server_error", false, 0, maskedErrorText},
		{"upstream 401", &engine.UpstreamError{Status: 401, Message: "bad key"}, maskedErrorText,
			http.StatusBadGateway, "server_error", false, 0, maskedErrorText},
		{"policy failure", errors.New("rules broken"), "blocked by policy",
			http.StatusBadGateway, "server_error", false, 0, "blocked by policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ae := oaiTurnError(tt.err, tt.text)
			if ae.Status != tt.status || ae.Code != tt.code || ae.Retryable != tt.retryable || ae.RetryAfter != tt.after || ae.Message != tt.message {
				t.Errorf("oaiTurnError = %+v\nwant status %d code %s retryable %t after %v message %q", ae, tt.status, tt.code, tt.retryable, tt.after, tt.message)
			}
		})
	}
}
