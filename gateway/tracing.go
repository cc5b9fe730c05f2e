package gateway

import (
	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/internal/tracing"
)

// traceContext takes the W3C trace context (traceparent, tracestate) of
// every request into its context when tracing is on, so the turns it
// starts continue the caller's trace: the chat and OpenAI-compatible
// turns through their run context (tracing.Follow in admit), submissions
// through the context stored with them. A malformed traceparent is
// ignored: the turn starts a new trace.
func traceContext(c *gin.Context) {
	if c.GetHeader("traceparent") != "" {
		c.Request = c.Request.WithContext(tracing.Extract(c.Request.Context(), c.Request.Header))
	}
	c.Next()
}
