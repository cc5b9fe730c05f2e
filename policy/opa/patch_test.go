package opa

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/ast"
)

// patchCases are documents and patches on which this package's RFC 6902
// agrees with evanphx/json-patch, the library the gateway used before.
var patchCases = []struct {
	name, doc, ops string
	// want is the patched document, exactly ("" when the patch fails).
	want string
}{
	{"replace member", `{"q":"x","limit":99}`, `[{"op":"replace","path":"/limit","value":50}]`, `{"q":"x","limit":50}`},
	{"add member at the end", `{"b":1,"a":2}`, `[{"op":"add","path":"/c","value":{"z":1,"y":[true,null]}}]`, `{"b":1,"a":2,"c":{"y":[true,null],"z":1}}`},
	{"add replaces a member in place", `{"b":1,"a":2}`, `[{"op":"add","path":"/b","value":"x"}]`, `{"b":"x","a":2}`},
	{"add into array", `{"l":[1,2,3]}`, `[{"op":"add","path":"/l/1","value":9}]`, `{"l":[1,9,2,3]}`},
	{"add at array end by index", `{"l":[1]}`, `[{"op":"add","path":"/l/1","value":2}]`, `{"l":[1,2]}`},
	{"add with -", `{"l":[]}`, `[{"op":"add","path":"/l/-","value":"a"},{"op":"add","path":"/l/-","value":"b"}]`, `{"l":["a","b"]}`},
	{"add past the end", `{"l":[1]}`, `[{"op":"add","path":"/l/3","value":2}]`, ""},
	{"add under a missing parent", `{}`, `[{"op":"add","path":"/a/b","value":1}]`, ""},
	{"add under a scalar", `{"a":1}`, `[{"op":"add","path":"/a/b","value":1}]`, ""},
	{"add whole document", `{"a":1}`, `[{"op":"add","path":"","value":{"b":2}}]`, `{"b":2}`},
	{"remove member", `{"a":1,"b":2,"c":3}`, `[{"op":"remove","path":"/b"}]`, `{"a":1,"c":3}`},
	{"remove element", `[1,2,3]`, `[{"op":"remove","path":"/0"}]`, `[2,3]`},
	{"remove missing member", `{"a":1}`, `[{"op":"remove","path":"/missing"}]`, ""},
	{"remove missing element", `[1]`, `[{"op":"remove","path":"/1"}]`, ""},
	{"remove with -", `[1]`, `[{"op":"remove","path":"/-"}]`, ""},
	{"remove a null member", `{"a":null,"b":1}`, `[{"op":"remove","path":"/a"}]`, `{"b":1}`},
	{"replace element", `{"l":["a","b"]}`, `[{"op":"replace","path":"/l/1","value":"c"}]`, `{"l":["a","c"]}`},
	{"replace missing member", `{}`, `[{"op":"replace","path":"/a","value":1}]`, ""},
	{"replace whole document", `{"a":1}`, `[{"op":"replace","path":"","value":[1]}]`, `[1]`},
	{"replace a null member", `{"a":null}`, `[{"op":"replace","path":"/a","value":1}]`, `{"a":1}`},
	{"move member", `{"a":{"x":1},"b":{}}`, `[{"op":"move","from":"/a/x","path":"/b/y"}]`, `{"a":{},"b":{"y":1}}`},
	{"move element", `[1,2,3]`, `[{"op":"move","from":"/0","path":"/2"}]`, `[2,3,1]`},
	{"move to itself", `{"a":1,"b":2}`, `[{"op":"move","from":"/a","path":"/a"}]`, `{"a":1,"b":2}`},
	{"move missing", `{}`, `[{"op":"move","from":"/a","path":"/b"}]`, ""},
	{"move into its own child", `{"a":{"b":{}}}`, `[{"op":"move","from":"/a","path":"/a/b/c"}]`, ""},
	{"copy member", `{"a":{"x":[1]}}`, `[{"op":"copy","from":"/a","path":"/b"},{"op":"add","path":"/b/x/-","value":2}]`, `{"a":{"x":[1]},"b":{"x":[1,2]}}`},
	{"copy whole document", `{"a":1}`, `[{"op":"copy","from":"","path":"/b"}]`, `{"a":1,"b":{"a":1}}`},
	{"copy missing", `{}`, `[{"op":"copy","from":"/a","path":"/b"}]`, ""},
	{"test passes", `{"a":{"b":[1,"x",{"c":true}]}}`, `[{"op":"test","path":"/a","value":{"b":[1,"x",{"c":true}]}}]`, `{"a":{"b":[1,"x",{"c":true}]}}`},
	{"test object members in another order", `{"a":{"x":1,"y":2}}`, `[{"op":"test","path":"/a","value":{"y":2,"x":1}}]`, `{"a":{"x":1,"y":2}}`},
	{"test fails", `{"a":1}`, `[{"op":"test","path":"/a","value":2}]`, ""},
	{"test type differs", `{"a":"1"}`, `[{"op":"test","path":"/a","value":1}]`, ""},
	{"test array length differs", `{"a":[1]}`, `[{"op":"test","path":"/a","value":[1,1]}]`, ""},
	{"test a null member", `{"a":null}`, `[{"op":"test","path":"/a","value":null}]`, `{"a":null}`},
	{"escaped tokens", `{"a/b":{"m~n":1}}`, `[{"op":"replace","path":"/a~1b/m~0n","value":2}]`, `{"a/b":{"m~n":2}}`},
	{"escape order ~01 is ~1", `{"~1":1}`, `[{"op":"remove","path":"/~01"}]`, `{}`},
	{"index into an object is a member name", `{"0":"x"}`, `[{"op":"replace","path":"/0","value":"y"}]`, `{"0":"y"}`},
	{"- in an object is a member name", `{}`, `[{"op":"add","path":"/-","value":1}]`, `{"-":1}`},
	{"strings are re-encoded as encoding/json writes them", `{"s":"a\u0041<>&\u2028"}`, `[{"op":"add","path":"/t","value":"\t\"\\"}]`, `{"s":"aA<>&\u2028","t":"\t\"\\"}`},
	{"numbers are kept exactly", `{"n":1.50,"big":123456789012345678901234567890}`, `[{"op":"add","path":"/m","value":1e3}]`, `{"n":1.50,"big":123456789012345678901234567890,"m":1e3}`},
	{"a failing op leaves nothing half done", `{"a":1}`, `[{"op":"add","path":"/b","value":1},{"op":"remove","path":"/zz"}]`, ""},
}

// rfcCases are patches on which evanphx/json-patch departs from RFC 6902
// or RFC 6901; this package follows the RFCs.
var rfcCases = []struct {
	name, doc, ops string
	want           string // "" when the patch must fail
}{
	{"negative index (evanphx counts from the end)", `[1,2]`, `[{"op":"remove","path":"/-1"}]`, ""},
	{"leading zero index (evanphx parses it)", `[1,2]`, `[{"op":"remove","path":"/01"}]`, ""},
	{"signed index (evanphx parses it)", `[1,2]`, `[{"op":"remove","path":"/+1"}]`, ""},
	{"~ not followed by 0 or 1 (evanphx keeps it)", `{"~2":1}`, `[{"op":"remove","path":"/~2"}]`, ""},
	{"test of a missing member with null (evanphx passes)", `{}`, `[{"op":"test","path":"/a","value":null}]`, ""},
	{"numbers equal by value (evanphx compares text)", `{"a":1.0}`, `[{"op":"test","path":"/a","value":1}]`, `{"a":1.0}`},
	{"empty member name (evanphx takes the container)", `{"":1,"a":2}`, `[{"op":"remove","path":"/"}]`, `{"a":2}`},
	{"replace whole document with a scalar (evanphx refuses)", `{"a":1}`, `[{"op":"replace","path":"","value":3}]`, `3`},
	{"copy to the whole document (evanphx adds member \"\")", `{"a":{"b":1}}`, `[{"op":"copy","from":"/a","path":""}]`, `{"b":1}`},
	{"test of an array holding null (evanphx panics)", `{"a":[null]}`, `[{"op":"test","path":"/a","value":[null]}]`, `{"a":[null]}`},
	{"scalar document (evanphx refuses)", `"x"`, `[{"op":"test","path":"","value":"x"}]`, `"x"`},
}

// ops parses a JSON array of patch ops the way decisions hold them.
func testOps(t testing.TB, text string) []patchOp {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	ops := make([]patchOp, len(raw))
	for i, r := range raw {
		term, err := ast.ParseTerm(string(r))
		if err != nil {
			t.Fatal(err)
		}
		if ops[i], _, err = parseOp(term.Value, nil); err != nil {
			t.Fatalf("op %s: %v", r, err)
		}
	}
	return ops
}

// ourPatch applies ops to doc with this package's RFC 6902.
func ourPatch(doc string, ops []patchOp) (string, error) {
	v, err := decodeDoc([]byte(doc), "{}")
	if err != nil {
		return "", err
	}
	if v, err = applyOps(v, ops, ToolCallPackage); err != nil {
		return "", err
	}
	return string(encodeDoc(nil, v)), nil
}

// evanphxPatch applies ops one by one with evanphx/json-patch, as
// decisions applied them before.
func evanphxPatch(doc string, ops []patchOp) (string, error) {
	out := []byte(doc)
	for _, op := range ops {
		p, err := jsonpatch.DecodePatch([]byte("[" + op.text + "]"))
		if err != nil {
			return "", err
		}
		if out, err = p.Apply(out); err != nil {
			return "", err
		}
	}
	return string(out), nil
}

func evanphxNoPanic(doc string, ops []patchOp) (out string, err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	out, err = evanphxPatch(doc, ops)
	return out, err, false
}

// sameJSON reports whether two JSON texts hold equal values.
func sameJSON(t testing.TB, x, y string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal([]byte(x), &a); err != nil {
		t.Fatalf("%s: %v", x, err)
	}
	if err := json.Unmarshal([]byte(y), &b); err != nil {
		t.Fatalf("%s: %v", y, err)
	}
	return reflect.DeepEqual(a, b)
}

func TestPatchAgreesWithEvanphx(t *testing.T) {
	for _, c := range patchCases {
		t.Run(c.name, func(t *testing.T) {
			ops := testOps(t, c.ops)
			got, err := ourPatch(c.doc, ops)
			theirs, theirErr := evanphxPatch(c.doc, ops)
			if (err != nil) != (theirErr != nil) {
				t.Fatalf("ours = %s, %v; evanphx = %s, %v", got, err, theirs, theirErr)
			}
			if c.want == "" {
				if err == nil {
					t.Fatalf("patched to %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("patched to %s, want %s", got, c.want)
			}
			if !sameJSON(t, got, theirs) {
				t.Errorf("ours %s, evanphx %s", got, theirs)
			}
		})
	}
}

func TestPatchFollowsRFCWhereEvanphxDeparts(t *testing.T) {
	for _, c := range rfcCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ourPatch(c.doc, testOps(t, c.ops))
			switch {
			case c.want == "" && err == nil:
				t.Fatalf("patched to %s, want an error", got)
			case c.want != "" && err != nil:
				t.Fatal(err)
			case got != c.want:
				t.Errorf("patched to %s, want %s", got, c.want)
			}
		})
	}
}

// TestPatchErrors checks that a failing op's error names the op and the
// path, as a rule author needs to find it.
func TestPatchErrors(t *testing.T) {
	for _, c := range []struct{ doc, ops, want string }{
		{`{"a":1}`, `[{"op":"remove","path":"/b"}]`, `applying op {"op":"remove","path":"/b"}: path "/b": no member "b"`},
		{`{"l":[1]}`, `[{"op":"add","path":"/l/5","value":0}]`, `path "/l/5": index 5 is out of range (the array has 1 elements)`},
		{`{"l":[1]}`, `[{"op":"replace","path":"/l/-","value":0}]`, `index "-" (past the last element) only names a place to add to`},
		{`{"a":"s"}`, `[{"op":"add","path":"/a/b","value":0}]`, `path "/a/b": a string has no member "b"`},
		{`{"a":1}`, `[{"op":"test","path":"/a","value":2}]`, `test failed: the value differs`},
		{`{"a":{}}`, `[{"op":"move","from":"/a","path":"/a/b"}]`, `cannot move "/a" into its own child "/a/b"`},
		{`{}`, `[{"op":"remove","path":"/~x"}]`, `"~x" is not a valid reference token (~ must be followed by 0 or 1)`},
	} {
		_, err := ourPatch(c.doc, testOps(t, c.ops))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on %s: error %v, want it to contain %q", c.ops, c.doc, err, c.want)
		}
	}
}

// TestOpText checks that an op's text, which orders ops and names them in
// RulesFired, is the canonical JSON it was before (encoding/json of
// ast.JSON).
func TestOpText(t *testing.T) {
	for _, op := range []string{
		`{"op":"add","path":"/a","value":{"z":[1,2.50,{"b":null,"a":"<&>"}],"y":"\u2028\t\u0001é"}}`,
		`{"path":"/x","op":"replace","value":{1:"n",true:"b","s":"s"}}`,
		`{"op":"add","path":"/s","value":{3,1,2}}`,
	} {
		term, err := ast.ParseTerm(op)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := parseOp(term.Value, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshalValue(term.Value)
		if err != nil {
			t.Fatal(err)
		}
		if p.text != string(want) {
			t.Errorf("text %s, want %s", p.text, want)
		}
	}
}

// TestApplyDoesNotAllocate checks that applying ops to a decoded document
// costs no allocation per op when nothing grows: replace, test, and a move
// out of and back into an object.
func TestApplyDoesNotAllocate(t *testing.T) {
	doc, err := decodeDoc([]byte(`{"query":"x","limit":1000,"filters":{"lang":"en","tags":["a","b"]}}`), "{}")
	if err != nil {
		t.Fatal(err)
	}
	ops := testOps(t, `[
		{"op":"replace","path":"/limit","value":50},
		{"op":"replace","path":"/filters/tags/1","value":"c"},
		{"op":"test","path":"/filters/lang","value":"en"},
		{"op":"move","from":"/filters/lang","path":"/lang"},
		{"op":"move","from":"/lang","path":"/filters/lang"}
	]`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := applyOps(doc, ops, ToolCallPackage); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("applying %d ops allocates %v times, want 0", len(ops), allocs)
	}
}

// BenchmarkPatch measures applying n replace ops to a tool input as a
// decision does: parse the ops from the decision document, decode the
// input, apply, encode. The allocations per extra op are the difference
// between n=1 and n=10, divided by 9.
func BenchmarkPatch(b *testing.B) {
	doc := []byte(`{"query":"turngate","limit":1000,"filters":{"lang":"en","since":"2026-01-01","tags":["a","b"]},"page":3}`)
	for _, n := range []int{1, 2, 10} {
		b.Run("ops="+strconv.Itoa(n), func(b *testing.B) {
			var terms []*ast.Term
			for i := range n {
				terms = append(terms, ast.MustParseTerm(`{"op":"replace","path":"/limit","value":`+strconv.Itoa(50+i)+`}`))
			}
			obj := ast.NewObject(ast.Item(patchTerm, ast.SetTerm(terms...)))
			b.ReportAllocs()
			for b.Loop() {
				d, _, err := decideToolCall(obj, doc)
				if err != nil || !bytes.Contains(d.Input, []byte(`"limit":`)) {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// FuzzPatch compares this package's RFC 6902 with evanphx/json-patch on
// random documents and ops, outside the cases where evanphx departs from
// the RFCs (rfcCases): both fail, or both give equal documents.
func FuzzPatch(f *testing.F) {
	for _, c := range patchCases {
		var ops []json.RawMessage
		_ = json.Unmarshal([]byte(c.ops), &ops)
		for _, op := range ops {
			f.Add(c.doc, string(op))
		}
	}
	f.Fuzz(func(t *testing.T, doc, opText string) {
		if !json.Valid([]byte(doc)) || !json.Valid([]byte(opText)) || !plainDoc(doc) {
			t.Skip()
		}
		term, err := ast.ParseTerm(opText)
		if err != nil {
			t.Skip()
		}
		op, _, err := parseOp(term.Value, nil)
		if err != nil || departs(&op) {
			t.Skip()
		}
		ops := []patchOp{op}
		got, err := ourPatch(doc, ops)
		theirs, theirErr, panicked := evanphxNoPanic(doc, ops)
		if panicked {
			t.Skip() // evanphx panics on some tests of arrays holding null
		}
		if (err != nil) != (theirErr != nil) {
			t.Fatalf("%s on %s: ours = %s, %v; evanphx = %s, %v", op.text, doc, got, err, theirs, theirErr)
		}
		if err == nil && !sameJSON(t, got, theirs) {
			t.Fatalf("%s on %s: ours %s, evanphx %s", op.text, doc, got, theirs)
		}
	})
}

// plainDoc reports whether doc is an object or array whose objects have
// no repeated member and whose numbers are integers written canonically
// (evanphx compares numbers by their text).
func plainDoc(doc string) bool {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	tok, err := dec.Token()
	d, ok := tok.(json.Delim)
	if err != nil || !ok || (d != '{' && d != '[') {
		return false
	}
	return plainValue(dec, d)
}

func plainValue(dec *json.Decoder, open json.Delim) bool {
	seen := map[string]bool{}
	for dec.More() {
		if open == '{' {
			k, err := dec.Token()
			if err != nil || seen[k.(string)] {
				return false
			}
			seen[k.(string)] = true
		}
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			if !plainValue(dec, v) {
				return false
			}
		case json.Number:
			if n, err := strconv.ParseInt(string(v), 10, 64); err != nil || strconv.FormatInt(n, 10) != string(v) {
				return false
			}
		}
	}
	_, err := dec.Token() // the closing delimiter
	return err == nil
}

// departs reports whether op is one of the rfcCases kinds: pointers with
// empty, escaped-oddly or non-canonical index tokens, ops on the whole
// document, a null test value, or a value that is not plain.
func departs(op *patchOp) bool {
	for _, p := range []string{op.path, op.from} {
		for _, tok := range strings.Split(p, "/")[1:] {
			if tok == "" || strings.Contains(tok, "~") || tok[0] == '+' || tok[0] == '-' && tok != "-" || len(tok) > 1 && tok[0] == '0' {
				return true
			}
		}
	}
	if op.path == "" || (op.op == "move" || op.op == "copy") && op.from == "" {
		return true
	}
	if op.op == "test" && op.value == nil {
		return true
	}
	if op.value != nil && !plainDoc(`[`+string(encodeDoc(nil, op.value))+`]`) {
		return true
	}
	return false
}

func TestSameJSON(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, true},
		{`{"n":1}`, `{"n":1.0}`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{``, `null`, true},
		{`"1"`, `1`, false},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":`, `{"a":`, false},
	} {
		if got := SameJSON([]byte(c.a), []byte(c.b)); got != c.same {
			t.Errorf("SameJSON(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
