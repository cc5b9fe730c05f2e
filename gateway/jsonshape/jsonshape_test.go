package jsonshape

import (
	"bytes"
	"encoding/json"
	"testing"
)

var testShape = Object(Fields{
	"s":    String(),
	"b":    Bool(),
	"i":    Integer(),
	"r":    Number(0, 2),
	"one":  IntegerIn(1, 1).Named("1 (one choice)"),
	"m":    Map(Number(-1, 1)),
	"a":    Array(Object(Fields{"x": String()})),
	"u":    OneOf("a string or an array of strings", String(), Array(String())),
	"t":    Array(Tagged("a part", Fields{"text": Object(Fields{"text": String()}), "img": Object(Fields{"img": Object(nil)})})),
	"free": Object(nil),
})

func decode(t testing.TB, doc string) any {
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return v
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ doc, path, message string }{
		{`{"s":"x","b":true,"i":3,"r":1.5,"one":1,"m":{"k":-1},"a":[{"x":"y","other":1}],"u":["a"],"t":[{"type":"text","text":"hi"},{"type":"img","img":{}}],"free":{"any":[1]},"unknown":5}`, "", ""},
		{`{"s":null,"a":[null],"u":null}`, "", ""},
		{`{"i":1e2}`, "", ""},
		{`{"s":5}`, "s", "expected a string, got JSON number 5"},
		{`{"s":"` + string(bytes.Repeat([]byte("x"), 40)) + `"}`, "", ""},
		{`{"b":"yes"}`, "b", `expected true or false, got JSON string "yes"`},
		{`{"i":1.5}`, "i", "expected an integer, got JSON number 1.5"},
		{`{"i":1e400}`, "i", "expected an integer, got JSON number 1e400"},
		{`{"r":"0.2"}`, "r", `expected a number, got JSON string "0.2"`},
		{`{"r":-0.1}`, "r", "must be between 0 and 2, not -0.1"},
		{`{"r":1e400}`, "r", "must be between 0 and 2, not 1e400"},
		{`{"one":2}`, "one", "must be 1 (one choice), not 2"},
		{`{"m":{"k":2}}`, "m.k", "must be between -1 and 1, not 2"},
		{`{"m":[]}`, "m", "expected an object, got JSON array"},
		{`{"a":[{"x":"y"},{"x":false}]}`, "a[1].x", "expected a string, got JSON boolean false"},
		{`{"u":{}}`, "u", "expected a string or an array of strings, got JSON object"},
		{`{"u":["a",1]}`, "u[1]", "expected a string, got JSON number 1"},
		{`{"t":["x"]}`, "t[0]", `expected a part, got JSON string "x"`},
		{`{"t":[{"text":"x"}]}`, "t[0].type", "is required: one of img, text"},
		{`{"t":[{"type":1}]}`, "t[0].type", "expected a string (one of img, text), got JSON number 1"},
		{`{"t":[{"type":"video"}]}`, "t[0].type", `must be one of img, text, not "video"`},
		{`{"t":[{"type":"img","img":5}]}`, "t[0].img", "expected an object, got JSON number 5"},
		{`{"free":"x"}`, "free", `expected an object, got JSON string "x"`},
		{`{"b":1,"a":2,"s":3}`, "a", "expected an array, got JSON number 2"}, // sorted keys: the first is named
		{`[]`, "", "expected an object, got JSON array"},
	} {
		err := testShape.Check(decode(t, tc.doc))
		switch {
		case tc.message == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.message != "" && (err == nil || err.Path != tc.path || err.Message != tc.message):
			t.Errorf("%s: got %v, want %s: %s", tc.doc, err, tc.path, tc.message)
		}
	}
}

// A Strict object refuses keys it does not declare, naming the closest
// declared one; a Strict tagged object takes its "type" key.
func TestStrict(t *testing.T) {
	shape := Object(Fields{
		"max_tokens": Integer(),
		"model":      String(),
		"blocks":     Array(Tagged("a block", Fields{"text": Object(Fields{"text": String()})}).Strict()),
	}).Strict()
	for _, tc := range []struct{ doc, path, message string }{
		{`{"model":"m","max_tokens":1,"blocks":[{"type":"text","text":"x"}]}`, "", ""},
		{`{"max_token":1}`, "max_token", `is not a known field; did you mean "max_tokens"?`},
		{`{"temperature":1}`, "temperature", "is not a known field (known: blocks, max_tokens, model)"},
		{`{"blocks":[{"type":"text","txt":"x"}]}`, "blocks[0].txt", `is not a known field; did you mean "text"?`},
	} {
		err := shape.Check(decode(t, tc.doc))
		switch {
		case tc.message == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.message != "" && (err == nil || err.Path != tc.path || err.Message != tc.message):
			t.Errorf("%s: got %v, want %s: %s", tc.doc, err, tc.path, tc.message)
		}
	}
}

// FuzzCheck: no document panics the checker, and every violation says
// what is wrong.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"s":"x","t":[{"type":"text","text":"hi"}]}`, `{"m":{"k":2},"u":["a",1]}`, `{"r":1e400,"one":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		if err := testShape.Check(v); err != nil && err.Message == "" {
			t.Fatalf("empty message for %s", data)
		}
	})
}
