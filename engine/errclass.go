package engine

import (
	"context"
	"errors"
	"net/http"
)

// Error classes: what kind of failure a turn error is (the reference's
// classifyChatError categories). The engine's recovery follows the class:
// context_overflow compacts and re-runs the step; an upstream error of
// class rate_limit or transient is retried within maxRetries (rate_limit
// honouring Retry-After); a stalled stream, though transient (a client may
// retry it), ends the turn as fatal and unknown do.
const (
	// ClassContextOverflow: the upstream rejected the request for not
	// fitting the model's context window.
	ClassContextOverflow = "context_overflow"
	// ClassRateLimit: the upstream asked to slow down (HTTP 429).
	ClassRateLimit = "rate_limit"
	// ClassTransient: a failure a retry may fix — upstream 5xx, 529, 408,
	// 409, a transport error, an in-stream error before the first chunk,
	// a stalled stream (timeout.chunkMs).
	ClassTransient = "transient"
	// ClassFatal: a failure a retry cannot fix — another upstream 4xx
	// (bad key, bad request), any the upstream says not to retry
	// (x-should-retry: false), the turn's own total timeout, a refused or
	// misconfigured turn, a rule failure, structured output that does not
	// match its schema.
	ClassFatal = "fatal"
	// ClassUnknown: anything else (a tool's own error, a panic).
	ClassUnknown = "unknown"
)

// ClassifyError returns the error class of err, a failure at stage (one
// of the Stage constants).
func ClassifyError(stage string, err error) string {
	var ue *UpstreamError
	switch {
	case err == nil:
		return ClassUnknown
	case errors.As(err, &ue):
		return classifyUpstream(ue)
	case errors.Is(err, errChunkTimeout):
		return ClassTransient
	case errors.Is(err, ErrModelTimeout), errors.Is(err, errTotalTimeout), errors.Is(err, context.DeadlineExceeded):
		return ClassFatal
	case stage == StageSetup || stage == StagePolicy:
		return ClassFatal
	case stage == StageStream:
		if _, ok := PublicText(err); ok {
			return ClassFatal // engine-made: structured output, limits
		}
	}
	return ClassUnknown
}

// classifyUpstream classes an upstream failure by what its provider
// decided: ue.Retryable already holds the SDKs' status table (408, 409,
// 429, 5xx), transport errors and the upstream's x-should-retry, so a
// failure the upstream says a retry cannot fix (a 429 of an exhausted
// quota, x-should-retry: false) is fatal.
func classifyUpstream(ue *UpstreamError) string {
	switch {
	case ue.ContextOverflow:
		return ClassContextOverflow
	case !ue.Retryable:
		return ClassFatal
	case ue.Status == http.StatusTooManyRequests:
		return ClassRateLimit
	}
	return ClassTransient
}

// retryable reports whether the engine retries a failure of class: rate
// limits and transient failures, within maxRetries.
func retryable(class string) bool {
	return class == ClassRateLimit || class == ClassTransient
}
