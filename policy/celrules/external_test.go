package celrules

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

func TestApplyExternal(t *testing.T) {
	tests := []struct {
		name       string
		rules      string // the rules' TurnConfig as JSON
		overrides  string
		want       string // the result as configFields renders it
		wantErrors []string
	}{
		{"nothing set by rules: the override applies", `{}`,
			`{"maxSteps": 8, "system": "s", "activeTools": ["b", "a"], "toolChoice": "required"}`,
			`{"activeTools":["b","a"],"maxSteps":8,"system":"s","toolChoice":"required"}`, nil},
		{"cannot raise a rule's maxSteps", `{"maxSteps": 3}`, `{"maxSteps": 50}`, `{"maxSteps":3}`, nil},
		{"may lower a rule's maxSteps", `{"maxSteps": 3}`, `{"maxSteps": 2}`, `{"maxSteps":2}`, nil},
		{"cannot re-add a tool", `{"activeTools": ["search"]}`, `{"activeTools": ["search", "delete"]}`,
			`{"activeTools":["search"]}`, nil},
		{"cannot undo toolChoice none", `{"toolChoice": "none"}`, `{"toolChoice": "required"}`,
			`{"toolChoice":"none"}`, nil},
		{"timeout bounds take the minimum", `{"timeout": {"totalMs": 1000}}`, `{"timeout": {"totalMs": 5000, "chunkMs": 200}}`,
			`{"timeout":{"chunkMs":200,"totalMs":1000}}`, nil},
		{"maxOutputTokens and maxRetries take the minimum", `{"maxOutputTokens": 100, "maxRetries": 1}`,
			`{"maxOutputTokens": 1000, "maxRetries": 5}`, `{"maxOutputTokens":100,"maxRetries":1}`, nil},
		{"headers are shallow-merged", `{"headers": {"a": "1", "b": "2"}}`, `{"headers": {"b": "3"}}`,
			`{"headers":{"a":"1","b":"3"}}`, nil},
		{"other scalars replace", `{"temperature": 0.2, "system": "rules"}`, `{"temperature": 1, "system": "ext"}`,
			`{"system":"ext","temperature":1}`, nil},
		{"invalid values are skipped, the rest applies", `{"maxSteps": 3}`,
			`{"maxSteps": 0, "toolChoice": "sometimes", "topK": 2.5, "tools": [], "flavour": "mint", "seed": 7}`,
			`{"maxSteps":3,"seed":7}`,
			[]string{"flavour: not a TurnConfig field", "maxSteps: 0 is out of range", `toolChoice: "sometimes" is not a tool choice`,
				"tools: not a TurnConfig field", "topK: want int, got double"}},
		{"messages are decoded strictly", `{}`, `{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}], "extra": 1}]}`,
			`{}`, []string{"messages: message 0:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg engine.TurnConfig
			if err := json.Unmarshal([]byte(tc.rules), &cfg); err != nil {
				t.Fatal(err)
			}
			var over map[string]any
			if err := json.Unmarshal([]byte(tc.overrides), &over); err != nil {
				t.Fatal(err)
			}
			errs := ApplyExternal(&cfg, over)
			got, _ := json.Marshal(configFields(&cfg))
			if string(got) != tc.want {
				t.Errorf("config = %s, want %s", got, tc.want)
			}
			if len(errs) != len(tc.wantErrors) {
				t.Fatalf("errors = %v, want %d", errs, len(tc.wantErrors))
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.wantErrors[i]) {
					t.Errorf("error %d = %q, want it to mention %q", i, e, tc.wantErrors[i])
				}
			}
		})
	}
}

func TestExternalFields(t *testing.T) {
	got := strings.Join(ExternalFields(), ",")
	if strings.Contains(got, "tools,") || !strings.HasPrefix(got, "model,system,messages,activeTools") {
		t.Errorf("ExternalFields() = %s", got)
	}
}
