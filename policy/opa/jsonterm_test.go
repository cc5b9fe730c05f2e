package opa

import (
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// slowJSONTerm is the conversion parseJSONTerm stands in for: Go values
// with exact numbers, then ast.InterfaceToValue.
func slowJSONTerm(raw []byte) (*ast.Term, error) {
	x, err := decodeJSON(raw, nil)
	if err != nil {
		return nil, err
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		return nil, err
	}
	return ast.NewTerm(v), nil
}

// checkJSONTerm fails t unless jsonTerm agrees with slowJSONTerm on raw:
// equal values, or errors with the same text.
func checkJSONTerm(t *testing.T, raw string) {
	t.Helper()
	want, wantErr := slowJSONTerm([]byte(raw))
	got, err := jsonTerm([]byte(raw), nil)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("jsonTerm(%q) error = %v, want %v", raw, err, wantErr)
	}
	if wantErr != nil {
		return
	}
	if got.Value.Compare(want.Value) != 0 || got.String() != want.String() {
		t.Fatalf("jsonTerm(%q) = %v, want %v", raw, got, want)
	}
}

func TestJSONTermMatchesInterfaceToValue(t *testing.T) {
	for _, raw := range []string{
		`{}`, `[]`, ` { } `, "\t[ ]\n", `null`, `true`, `false`, `""`, `0`, `-0`, `1.5e3`, `-12.75E-2`, `1e400`, `1E+2`,
		`12345678901234567890`, `100`, `-1`,
		`{"query":"turngate","limit":10}`,
		`{"a":[1,2,{"b":null,"c":[true,false]}],"d":{"e":{"f":"g"}}}`,
		`{"z":1,"a":2,"m":[3,"x"]}`,
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":{"c":2}}}`, `[{"k":1,"k":1}]`,
		`{"":""}`, `{"a b":"c d"}`,
		`"quote \" inside"`, `"back\\slash"`, `"\/\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"\ud800"`,
		`"héllo wörld 中文 😀"`, "\"bad \xff utf8\"", "{\"k\xfe\":\"v\"}", `{"\u0041":"\u0042"}`,
		`{"a": [ 1 , 2 ] , "b" : { } }`,
		`{"x":1} trailing`, `{"x":}`, `[1,]`, `{"a" 1}`, `nul`, `"unterminated`, `{"a":1}{"b":2}`,
		manyKeys(40, -1), manyKeys(40, 3), manyKeys(40, 39), manyKeys(scanKeys, scanKeys-1), manyKeys(scanKeys+1, scanKeys),
	} {
		t.Run(raw, func(t *testing.T) { checkJSONTerm(t, raw) })
	}
}

// manyKeys is an object of n keys k0…k(n-1) whose last key repeats key dup
// (none when dup < 0): objects past scanKeys find duplicates through a map.
func manyKeys(n, dup int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		k := i
		if i == n-1 && dup >= 0 {
			k = dup
		}
		fmt.Fprintf(&b, `"k%d":%d`, k, i)
	}
	b.WriteByte('}')
	return b.String()
}

// TestJSONTermManyKeysLinear checks that a duplicate key is still found in
// an object far larger than scanKeys, which then takes the slow path.
func TestJSONTermManyKeysLinear(t *testing.T) {
	for _, dup := range []int{-1, 0, 9999} {
		raw := manyKeys(20000, dup)
		_, ok, err := parseJSONTerm([]byte(raw))
		if err != nil || ok != (dup < 0) {
			t.Errorf("parseJSONTerm(20,000 keys, duplicate of k%d) = ok %v, %v", dup, ok, err)
		}
	}
}

// FuzzJSONTerm checks that jsonTerm and the Go-values conversion agree on
// arbitrary bytes.
func FuzzJSONTerm(f *testing.F) {
	for _, s := range []string{`{"query":"turngate","limit":10}`, `[1,"a",null,true,{"b":[]}]`, `"\u00e9\n"`, `1e400`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.TrimSpace(raw) == "" {
			return // jsonTerm's empty case, decided before any conversion
		}
		checkJSONTerm(t, raw)
	})
}
