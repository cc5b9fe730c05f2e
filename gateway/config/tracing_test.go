package config

import "testing"

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
