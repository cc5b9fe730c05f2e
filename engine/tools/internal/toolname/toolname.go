// Package toolname checks and repairs tool names so that every model API
// accepts them.
package toolname

import (
	"fmt"
	"strings"
)

// MaxLen is the longest tool name OpenAI's function calling accepts (its
// pattern is ^[a-zA-Z0-9_-]{1,64}$); Anthropic accepts the same set.
const MaxLen = 64

// Check reports why name is not a valid tool name, or nil.
func Check(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("tool name is empty")
	case len(name) > MaxLen:
		return fmt.Errorf("tool name %q is longer than %d characters", name, MaxLen)
	case strings.IndexFunc(name, func(r rune) bool { return !allowed(r) }) >= 0:
		return fmt.Errorf("tool name %q: only letters, digits, '_' and '-' are allowed", name)
	}
	return nil
}

// Sanitize returns name with every disallowed character replaced by '_',
// cut to MaxLen bytes. It returns "" only for an empty name.
func Sanitize(name string) string {
	s := strings.Map(func(r rune) rune {
		if allowed(r) {
			return r
		}
		return '_'
	}, name)
	if len(s) > MaxLen {
		s = s[:MaxLen]
	}
	return s
}

func allowed(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}
