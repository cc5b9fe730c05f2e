package config

import (
	"maps"
	"slices"

	"golang.org/x/net/http/httpguts"

	"github.com/turngate/turngate/internal/tracing"
)

// DefaultSampleRatio samples every trace when tracing.sampleRatio is unset.
const DefaultSampleRatio = 1.0

// Tracing configures OpenTelemetry traces (off by default): a span per
// turn, step, model call and tool call, exported over OTLP/HTTP, with the
// W3C trace context taken from incoming requests and sent upstream.
type Tracing struct {
	// Enabled turns tracing on.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP/HTTP collector URL, e.g.
	// http://localhost:4318 (the path defaults to /v1/traces).
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with every export (e.g. authorization).
	Headers map[string]string `yaml:"headers"`
	// SampleRatio is the fraction of new traces sampled, 0 to 1 (default
	// 1). A request's traceparent decides for the traces it continues.
	SampleRatio *float64 `yaml:"sampleRatio"`
	// ServiceName is the service.name resource attribute (default turngate).
	ServiceName string `yaml:"serviceName"`
}

// Ratio returns the sample ratio, DefaultSampleRatio when unset.
func (t *Tracing) Ratio() float64 {
	if t.SampleRatio == nil {
		return DefaultSampleRatio
	}
	return *t.SampleRatio
}

// validate reports the tracing settings that cannot work, each at its
// value (a header name at its key).
func (t *Tracing) validate(report func(error)) {
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		report(atField("tracing.sampleRatio", "tracing.sampleRatio: must be between 0 and 1, not %v", *r))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		h := keyPath("tracing.headers", name)
		if !httpguts.ValidHeaderFieldName(name) {
			report(atKey(h, "%s: not a valid HTTP header name", h))
		}
		if !httpguts.ValidHeaderFieldValue(t.Headers[name]) {
			report(atField(h, "%s: the value contains a control character", h))
		}
	}
	if !t.Enabled {
		return
	}
	if _, err := tracing.EndpointURL(t.Endpoint); err != nil {
		report(atField("tracing.endpoint", "tracing.endpoint: %v", err))
	}
}
