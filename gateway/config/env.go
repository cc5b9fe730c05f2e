package config

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in every string reachable
// from v (struct fields, slices, map values) using lookup, and returns an
// error for each string it cannot expand, at its field path (a string
// left as written). "$$" stands for a literal "$".
func expandEnv(v reflect.Value, path string, lookup func(string) (string, bool)) []error {
	var errs []error
	switch v.Kind() {
	case reflect.String:
		s, err := expand(v.String(), lookup)
		if err != nil {
			return []error{atField(path, "%s: %w", path, err)}
		}
		v.SetString(s)
	case reflect.Pointer:
		if !v.IsNil() {
			return expandEnv(v.Elem(), path, lookup)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue // not decoded: not the file's
			}
			name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			p := path // an inline struct's fields are its parent's
			if !strings.Contains(opts, "inline") {
				p = joinPath(path, cmp.Or(name, strings.ToLower(t.Field(i).Name)))
			}
			errs = append(errs, expandEnv(v.Field(i), p, lookup)...)
		}
	case reflect.Slice:
		for i := range v.Len() {
			errs = append(errs, expandEnv(v.Index(i), fmt.Sprintf("%s[%d]", path, i), lookup)...)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface {
			return nil // free-form data such as JSON schemas is not expanded
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			errs = append(errs, expandEnv(elem, keyPath(path, fmt.Sprint(k)), lookup)...)
			v.SetMapIndex(k, elem)
		}
	}
	return errs
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// expand expands the references in one string.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if i+1 >= len(s) || s[i+1] != '{' {
			b.WriteByte('$')
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ at offset %d", i)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("invalid environment variable name %q", name)
		}
		val, ok := lookup(name)
		switch {
		case ok && (val != "" || !hasDef):
			b.WriteString(val)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name)
		}
		i += end
	}
	return b.String(), nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
