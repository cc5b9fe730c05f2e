// Package jsonstr appends strings as JSON string literals without
// allocating: the hot paths that write JSON by hand (the UI message stream's
// frames, patched tool inputs) share one escaper instead of each keeping a
// copy.
package jsonstr

import "unicode/utf8"

// Append appends s as a JSON string literal escaped as encoding/json does
// with HTML escaping off (and as JavaScript's JSON.stringify does):
// quotes, backslashes and control characters, plus U+2028 and U+2029;
// invalid UTF-8 becomes U+FFFD.
func Append(dst []byte, s string) []byte { return appendString(dst, s, &plain) }

// AppendHTMLEscaped is Append that also escapes <, > and &, as
// json.Marshal does.
func AppendHTMLEscaped(dst []byte, s string) []byte { return appendString(dst, s, &plainHTML) }

const hexDigits = "0123456789abcdef"

// plain and plainHTML report the ASCII bytes a string encodes as
// themselves: not control characters, '"' or '\\'; plainHTML not <, > and
// & either.
var plain, plainHTML = plainTable(`"\`), plainTable(`"\<>&`)

func plainTable(escaped string) (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range escaped {
		t[c] = false
	}
	return t
}

func appendString(dst []byte, s string, plain *[utf8.RuneSelf]bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
