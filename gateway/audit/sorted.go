package audit

import (
	"bytes"
	"encoding/json"
	"slices"
)

// member is one object member of compact JSON: its quoted key, the key as
// it sorts, and its value.
type member struct {
	key, sortKey, val []byte
}

// appendSorted appends the compact JSON value v (as json.Marshal writes
// it) to dst with every object's members in key order, the order
// json.Marshal gives a map's keys, plus extra among the members of v
// itself when v is an object. It produces what unmarshalling v into a
// map and marshalling that again would, without building the map.
//
// ms is scratch space: the members of the objects being reordered, from
// v's down to the innermost one being written, are appended to it and
// dropped again, so one slice serves a whole record. appendSorted returns
// it, grown if it had to be, with its length as it was.
func appendSorted(dst, v []byte, extra *member, ms []member) ([]byte, []member) {
	switch v[0] {
	case '{':
		base := len(ms)
		ms = appendMembers(ms, v)
		if extra != nil {
			ms = append(ms, *extra)
		}
		end := len(ms)
		slices.SortFunc(ms[base:end], func(a, b member) int { return bytes.Compare(a.sortKey, b.sortKey) })
		dst = append(dst, '{')
		for i := base; i < end; i++ {
			if i > base {
				dst = append(dst, ',')
			}
			dst = append(dst, ms[i].key...)
			dst = append(dst, ':')
			dst, ms = appendSorted(dst, ms[i].val, nil, ms)
		}
		return append(dst, '}'), ms[:base]
	case '[':
		dst = append(dst, '[')
		for i := 1; v[i] != ']'; {
			end := valueEnd(v, i)
			dst, ms = appendSorted(dst, v[i:end], nil, ms)
			if v[end] == ',' {
				dst = append(dst, ',')
				end++
			}
			i = end
		}
		return append(dst, ']'), ms
	}
	return append(dst, v...), ms
}

// appendMembers appends the members of the compact JSON object v to ms.
func appendMembers(ms []member, v []byte) []member {
	for i := 1; v[i] != '}'; {
		keyEnd := valueEnd(v, i) // v[keyEnd] is ':'
		valEnd := valueEnd(v, keyEnd+1)
		ms = append(ms, member{key: v[i:keyEnd], sortKey: sortKey(v[i:keyEnd]), val: v[keyEnd+1 : valEnd]})
		i = valEnd
		if v[i] == ',' {
			i++
		}
	}
	return ms
}

// sortKey is the string the quoted JSON key q denotes.
func sortKey(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	var s string
	_ = json.Unmarshal(q, &s) // q is a valid JSON string: json.Marshal wrote it
	return []byte(s)
}

// valueEnd returns the index just past the compact JSON value starting at
// v[i].
func valueEnd(v []byte, i int) int {
	switch v[i] {
	case '"':
		for j := i + 1; ; j++ {
			switch v[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch v[j] {
			case '"':
				j = valueEnd(v, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(v) && v[j] != ',' && v[j] != '}' && v[j] != ']' {
		j++
	}
	return j
}
