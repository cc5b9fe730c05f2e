package claimpath

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Path
		err  string
	}{
		{"sub", Path{"sub"}, ""},
		{"realm_access.roles", Path{"realm_access", "roles"}, ""},
		{`"https://example.com/roles"`, Path{"https://example.com/roles"}, ""},
		{`resource_access."my.client".roles`, Path{"resource_access", "my.client", "roles"}, ""},
		{`"a\"b\\c"`, Path{`a"b\c`}, ""},
		{"", nil, "empty claim path"},
		{"a.", nil, "ends with a dot"},
		{".a", nil, "empty name at offset 0"},
		{"a..b", nil, "empty name at offset 2"},
		{`a"b`, nil, `'"' at offset 1; quote a name`},
		{`"ab`, nil, "not closed"},
		{`"a"b`, nil, "expected . at offset 3"},
		{`""`, nil, "empty quoted name"},
		{`"a\n"`, nil, `only \" and \\ are escapes`},
		{"a b", nil, "' ' at offset 1"},
		{strings.Repeat("a", 513), nil, "longer than 512"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestLookup(t *testing.T) {
	var claims map[string]any
	_ = json.Unmarshal([]byte(`{"realm_access":{"roles":["a","b"]},"sub":"x","https://e.com/r":"r","n":null}`), &claims)
	for _, tc := range []struct {
		path string
		ok   bool
	}{{"realm_access.roles", true}, {"sub", true}, {`"https://e.com/r"`, true}, {"sub.deeper", false}, {"missing", false}, {"n", true}, {"n.x", false}} {
		_, ok := mustParse(t, tc.path).Lookup(claims)
		if ok != tc.ok {
			t.Errorf("Lookup(%s) found %v, want %v", tc.path, ok, tc.ok)
		}
	}
}

func mustParse(t *testing.T, s string) Path {
	p, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzParse: Parse never panics, and what it parses String writes back
// to the same path.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"sub", "realm_access.roles", `"https://e.com/roles"`, `a."b.c".d`, `"a\"\\"`, "a..b", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(p.String())
		if err != nil || !slices.Equal(p, again) {
			t.Fatalf("Parse(%q) = %q; String %q parses to %q, %v", s, p, p.String(), again, err)
		}
		_, _ = p.Lookup(map[string]any{"a": map[string]any{"b": 1}})
	})
}
