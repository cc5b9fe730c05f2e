package opa

import (
	"slices"
	"testing"
)

// TestStateReadsDerived: the states a tool_call module reads are the ones
// it names; a read whose name the compiler cannot know computes every
// declared state, never none (none would leave input.state without the
// value and switch the limit off).
func TestStateReadsDerived(t *testing.T) {
	schema := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"emails_per_hour": map[string]any{"type": "number"},
		"posts_per_hour":  map[string]any{"type": "number"},
	}}
	all := []string{"emails_per_hour", "posts_per_hour"}
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"named", `input.state.emails_per_hour >= 3`, []string{"emails_per_hour"}},
		{"indexed by a literal", `input.state["posts_per_hour"] >= 3`, []string{"posts_per_hour"}},
		{"none", `input.tool.name == "x"`, nil},
		{"computed state key", `k := concat("", ["emails", "_per_hour"]); input.state[k] >= 3`, all},
		{"state whole", `s := input.state; s.emails_per_hour >= 3`, all},
		{"object.get", `object.get(input.state, "emails_per_hour", 0) >= 3`, all},
		{"input whole", `x := input; x.state.emails_per_hour >= 3`, all},
		{"computed input key", `k := concat("", ["st", "ate"]); input[k].emails_per_hour >= 3`, all},
		{"iterating input", `some k, v in input; k == "state"; v.emails_per_hour >= 3`, all},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Options{StateSchema: schema}, map[string]string{"tools.rego": "package turngate.tool_call\n\nimport rego.v1\n\nblock contains \"x\" if {\n\t" + tt.body + "\n}\n"})
			if got := p.StateReads(ToolCallPackage); !slices.Equal(got, tt.want) {
				t.Errorf("StateReads = %v, want %v", got, tt.want)
			}
		})
	}
}
