package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/turngate/turngate/engine"
)

func TestClassifyError(t *testing.T) {
	tests := []struct {
		name  string
		stage string
		err   error
		want  string
	}{
		{"429", engine.StageStream, &engine.UpstreamError{Status: 429, Retryable: true}, engine.ClassRateLimit},
		{"529 overloaded", engine.StageStream, &engine.UpstreamError{Status: 529, Retryable: true}, engine.ClassTransient},
		{"500", engine.StageStream, &engine.UpstreamError{Status: 500, Retryable: true}, engine.ClassTransient},
		{"503", engine.StageStream, &engine.UpstreamError{Status: 503, Retryable: true}, engine.ClassTransient},
		{"500 with x-should-retry: false", engine.StageStream, &engine.UpstreamError{Status: 500}, engine.ClassFatal},
		{"429 the upstream says not to retry", engine.StageStream, &engine.UpstreamError{Status: 429}, engine.ClassFatal},
		{"in-stream error of a permanent type", engine.StageStream, &engine.UpstreamError{Message: "error in stream: invalid_request_error"}, engine.ClassFatal},
		{"400 context length", engine.StageStream, &engine.UpstreamError{Status: 400, ContextOverflow: true, Message: "context_length_exceeded"}, engine.ClassContextOverflow},
		{"400", engine.StageStream, &engine.UpstreamError{Status: 400, Message: "bad temperature"}, engine.ClassFatal},
		{"401", engine.StageStream, &engine.UpstreamError{Status: 401}, engine.ClassFatal},
		{"network error", engine.StageStream, &engine.UpstreamError{Message: "connection reset", Retryable: true}, engine.ClassTransient},
		{"wrapped upstream", engine.StageStream, fmt.Errorf("step 0: %w", &engine.UpstreamError{Status: 429, Retryable: true}), engine.ClassRateLimit},
		{"deadline", engine.StageStream, context.DeadlineExceeded, engine.ClassFatal},
		{"model timeout", engine.StageStream, fmt.Errorf("x: %w", engine.ErrModelTimeout), engine.ClassFatal},
		{"beforeTurn failure", engine.StageSetup, errors.New("beforeTurn: boom"), engine.ClassFatal},
		{"rule failure", engine.StagePolicy, errors.New("evaluating beforeStep rules"), engine.ClassFatal},
		{"structured output", engine.StageStream, engine.PublicError("structured output: no match", nil), engine.ClassFatal},
		{"tool error", engine.StageTool, errors.New("tool crashed"), engine.ClassUnknown},
		{"nil", engine.StageStream, nil, engine.ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := engine.ClassifyError(tt.stage, tt.err); got != tt.want {
				t.Errorf("ClassifyError(%s, %v) = %s, want %s", tt.stage, tt.err, got, tt.want)
			}
		})
	}
}
