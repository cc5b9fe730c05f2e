package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodingJSON is what encoding/json writes for s, with or without HTML
// escaping.
func encodingJSON(t testing.TB, s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

var cases = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "<script>&amp;</script>", "line\u2028para\u2029",
	"émoji 🙂 ü", "bad \xff\xfe utf8", "\xed\xa0\x80 surrogate", "ends in \xe2\x82",
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	for _, s := range cases {
		if got, want := string(Append(nil, s)), encodingJSON(t, s, false); got != want {
			t.Errorf("Append(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(AppendHTMLEscaped(nil, s)), encodingJSON(t, s, true); got != want {
			t.Errorf("AppendHTMLEscaped(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(Append(nil, s)), encodingJSON(t, s, false); got != want {
			t.Errorf("Append(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(AppendHTMLEscaped(nil, s)), encodingJSON(t, s, true); got != want {
			t.Errorf("AppendHTMLEscaped(%q) = %s, want %s", s, got, want)
		}
	})
}
