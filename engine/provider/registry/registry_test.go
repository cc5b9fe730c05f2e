package registry

import (
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/openai"
	"github.com/turngate/turngate/engine/provider/scripted"
)

func TestResolve(t *testing.T) {
	sp, op := scripted.Default(), openai.New(openai.Config{BaseURL: "http://vllm:8000/v1"})
	r, err := New(map[string]engine.Provider{"scripted": sp, "vllm": op},
		map[string]Alias{"default": {Provider: "scripted", Model: "demo"}, "fast": {Provider: "vllm", Model: "meta-llama/Llama-3.1-8B"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, model string
		want        engine.Provider
		wantID      string
		wantErr     string
	}{
		{"alias", "default", sp, "demo", ""},
		{"alias to vllm", "fast", op, "meta-llama/Llama-3.1-8B", ""},
		{"provider/model with slashes", "vllm/org/model", op, "org/model", ""},
		{"unknown", "gpt-9", nil, "", `resolving model "gpt-9": no alias or provider/model of that name (aliases: default, fast)`},
		{"unknown provider", "other/x", nil, "", "no alias"},
		{"empty model id", "vllm/", nil, "", "no alias"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, id, err := r.Resolve(tt.model)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || p != tt.want || id != tt.wantID {
				t.Errorf("Resolve = %v, %q, %v; want %v, %q", p, id, err, tt.want, tt.wantID)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(map[string]engine.Provider{"a/b": scripted.Default(), "nil": nil, "s": scripted.Default()},
		map[string]Alias{"x": {Provider: "missing", Model: "m"}, "y": {Provider: "s"}, "s/shadow": {Provider: "s", Model: "m"}})
	want := `building model registry: alias "s/shadow": shadows a provider/model name
alias "x": unknown provider "missing"
alias "y": no model id
provider "nil": nil provider
provider name "a/b": must be non-empty and contain no slash`
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
}
