package suggest

import "testing"

func TestClosest(t *testing.T) {
	decisions := []string{"block", "substitute", "approval", "patch", "redact"}
	for _, tt := range []struct {
		word  string
		names []string
		want  string
	}{
		{"blocks", decisions, "block"},
		{"substitue", decisions, "substitute"},
		{"aproval", decisions, "approval"},
		{"redacts", decisions, "redact"},
		{"Block", decisions, "block"},
		{"block", decisions, ""},    // itself: nothing to suggest
		{"allowed", decisions, ""},  // a helper, not a typo
		{"is_admin", decisions, ""}, // a helper, not a typo
		{"maxStep", []string{"maxSteps", "model"}, "maxSteps"},
		{"tenat", []string{"tenant", "subject", "roles"}, "tenant"},
		{"x", nil, ""},
	} {
		if got := Closest(tt.word, tt.names); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
}
