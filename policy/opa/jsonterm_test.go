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
	} {
		t.Run(raw, func(t *testing.T) { checkJSONTerm(t, raw) })
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
