// Package claimpath names a value inside a JWT's claims: a path of member
// names separated by dots, "realm_access.roles", where a name that holds a
// dot, a quote or a space is written in double quotes with \" and \\
// escapes, as Auth0's namespaced claims need:
// "https://example.com/roles" or resource_access."my-client".roles.
package claimpath

import (
	"errors"
	"fmt"
	"strings"
)

// Path is a parsed claim path: the member names from the outermost in.
type Path []string

// maxLen bounds a path's text; a claim path is a configuration value.
const maxLen = 512

// Parse parses s. Every error says what is wrong and where (a byte
// offset of s).
func Parse(s string) (Path, error) {
	if s == "" {
		return nil, errors.New("empty claim path")
	}
	if len(s) > maxLen {
		return nil, fmt.Errorf("claim path longer than %d bytes", maxLen)
	}
	var p Path
	for i := 0; ; {
		name, next, err := segment(s, i)
		if err != nil {
			return nil, err
		}
		p = append(p, name)
		if next == len(s) {
			return p, nil
		}
		if s[next] != '.' {
			return nil, fmt.Errorf("claim path %q: expected . at offset %d, found %q", s, next, s[next])
		}
		i = next + 1
		if i == len(s) {
			return nil, fmt.Errorf("claim path %q: ends with a dot; a name must follow it", s)
		}
	}
}

// segment reads the name starting at offset i of s; next is the offset
// after it.
func segment(s string, i int) (name string, next int, err error) {
	if s[i] != '"' {
		j := i
		for j < len(s) && s[j] != '.' {
			if s[j] == '"' || s[j] == ' ' || s[j] == '\\' || s[j] < 0x20 {
				return "", 0, fmt.Errorf("claim path %q: %q at offset %d; quote a name that holds it (\"a.b\")", s, s[j], j)
			}
			j++
		}
		if j == i {
			return "", 0, fmt.Errorf("claim path %q: empty name at offset %d", s, i)
		}
		return s[i:j], j, nil
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; c {
		case '"':
			if b.Len() == 0 {
				return "", 0, fmt.Errorf("claim path %q: empty quoted name at offset %d", s, i)
			}
			return b.String(), j + 1, nil
		case '\\':
			if j+1 == len(s) || (s[j+1] != '"' && s[j+1] != '\\') {
				return "", 0, fmt.Errorf("claim path %q: offset %d: only \\\" and \\\\ are escapes", s, j)
			}
			j++
			b.WriteByte(s[j])
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("claim path %q: the quote at offset %d is not closed", s, i)
}

// String writes p back as Parse reads it.
func (p Path) String() string {
	parts := make([]string, len(p))
	for i, name := range p {
		if strings.ContainsAny(name, ".\" \\") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 }) {
			name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
		}
		parts[i] = name
	}
	return strings.Join(parts, ".")
}

// Lookup returns the value at p in claims (a decoded JSON object), and
// whether every member on the way exists and is an object.
func (p Path) Lookup(claims map[string]any) (any, bool) {
	var v any = claims
	for _, name := range p {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return v, true
}
