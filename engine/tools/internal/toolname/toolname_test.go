package toolname

import (
	"strings"
	"testing"
)

func TestCheckAndSanitize(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		valid     bool
		sanitized string
	}{
		{name: "plain", in: "get_weather-2", valid: true, sanitized: "get_weather-2"},
		{name: "empty", in: "", sanitized: ""},
		{name: "dots and slashes", in: "fs.read/all", sanitized: "fs_read_all"},
		{name: "unicode", in: "météo", sanitized: "m_t_o"},
		{name: "too long", in: strings.Repeat("a", MaxLen+1), sanitized: strings.Repeat("a", MaxLen)},
		{name: "longest", in: strings.Repeat("a", MaxLen), valid: true, sanitized: strings.Repeat("a", MaxLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check(tt.in); (err == nil) != tt.valid {
				t.Errorf("Check(%q) = %v, want valid=%v", tt.in, err, tt.valid)
			}
			got := Sanitize(tt.in)
			if got != tt.sanitized {
				t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.sanitized)
			}
			if got != "" && Check(got) != nil {
				t.Errorf("Sanitize(%q) = %q is not a valid name", tt.in, got)
			}
		})
	}
}
