package config

import (
	"strings"
	"testing"
)

func TestTracingConfig(t *testing.T) {
	c, err := Parse("test.yaml", []byte("tracing:\n  enabled: true\n  endpoint: http://127.0.0.1:4318\n  headers: {Authorization: \"Bearer ${OTLP_TOKEN}\"}\n"),
		env(map[string]string{"OTLP_TOKEN": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.Tracing; !tr.Enabled || tr.Ratio() != 1 || tr.Headers["Authorization"] != "Bearer tok" {
		t.Errorf("tracing = %+v (ratio %v)", tr, tr.Ratio())
	}
	c, err = Parse("test.yaml", []byte("listen: 127.0.0.1:1\n"), env(nil))
	if err != nil || c.Tracing.Enabled {
		t.Errorf("tracing must be off by default: %+v %v", c.Tracing, err)
	}
}

func TestTracingConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"enabled without endpoint", "tracing:\n  enabled: true\n", []string{"line 2: tracing.endpoint: no endpoint"}},
		{"endpoint scheme", "tracing:\n  enabled: true\n  endpoint: grpc://collector:4317\n", []string{"line 3: tracing.endpoint:", "scheme must be http or https"}},
		{"endpoint without host", "tracing: {enabled: true, endpoint: \"http:///v1/traces\"}\n", []string{"tracing.endpoint:", "no host"}},
		{"endpoint with credentials", "tracing: {enabled: true, endpoint: \"http://u:p@collector:4318\"}\n", []string{"tracing.endpoint:", "send credentials in tracing.headers"}},
		{"ratio above one", "tracing:\n  sampleRatio: 1.5\n", []string{"line 2: tracing.sampleRatio: must be between 0 and 1, not 1.5"}},
		{"negative ratio", "tracing: {sampleRatio: -0.1}\n", []string{"tracing.sampleRatio: must be between 0 and 1"}},
		{"ratio not a number", "tracing:\n  sampleRatio: half\n", []string{"line 2 col 16: tracing.sampleRatio"}},
		{"bad header name", "tracing:\n  headers: {\"bad header\": x}\n", []string{"tracing.headers.bad header: not a valid HTTP header name"}},
		{"header value with a newline", "tracing:\n  headers: {X-Token: \"a\\nb\"}\n", []string{"line 2: tracing.headers.X-Token: the value contains a control character"}},
		{"misspelt key", "tracing:\n  endpiont: http://x\n", []string{`line 2 col 3: tracing: unknown key "endpiont" (did you mean "endpoint"?)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
