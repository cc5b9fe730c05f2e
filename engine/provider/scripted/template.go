package scripted

import (
	"sort"
	"strings"
)

// Templates: "${name}" in a reply's strings is replaced by a variable of the
// match ("text", regex groups "0", "1"… and named groups, "tool" and
// "output" for tool results); "$$" is a literal "$".

// templateRefs returns the variable names s refers to.
func templateRefs(s string) []string {
	var refs []string
	expand(s, func(name string) string {
		refs = append(refs, name)
		return ""
	})
	return refs
}

// expand replaces the references in s with lookup's values.
func expand(s string, lookup func(name string) string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			b.WriteString(lookup(s[i+2 : i+2+end]))
			s = s[i+3+end:]
		default:
			b.WriteByte('$')
			s = s[i+1:]
		}
	}
}

// walkStrings returns a copy of v with every string leaf replaced by f's
// result. v holds values decoded from YAML or JSON.
func walkStrings(v any, f func(string) string) any {
	switch t := v.(type) {
	case string:
		return f(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = walkStrings(e, f)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = walkStrings(e, f)
		}
		return out
	}
	return v
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
