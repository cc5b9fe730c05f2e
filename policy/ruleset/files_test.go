package ruleset

import (
	"encoding/json"
	"testing"
)

// compactFiles replaces the data: URLs of file parts only, and leaves an
// input without them byte for byte.
func TestCompactFiles(t *testing.T) {
	// sha256("hello") and sha256 of the unparsable URL "data:image/png;base64,@@@@".
	const hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no data URL", `{"b":1,"a":"x"}`, `{"b":1,"a":"x"}`},
		{"data URL in text is kept", `{"type":"text","text":"data:,hi","z":1}`, `{"type":"text","text":"data:,hi","z":1}`},
		{"url of a non-file part is kept", `{"type":"link","url":"data:,hi"}`, `{"type":"link","url":"data:,hi"}`},
		{"base64", `{"m":[{"type":"file","mediaType":"text/plain","url":"data:text/plain;base64,aGVsbG8=","n":1.50}]}`,
			`{"m":[{"mediaType":"text/plain","n":1.50,"type":"file","url":"data:text/plain;sha256=` + hello + `;size=5"}]}`},
		{"percent-encoded", `[{"type":"file","url":"data:text/plain,h%65llo"}]`,
			`[{"type":"file","url":"data:text/plain;sha256=` + hello + `;size=5"}]`},
		{"remote URL is kept", `[{"type":"file","url":"https://example.com/data:x"}]`, `[{"type":"file","url":"https://example.com/data:x"}]`},
		{"unparsable", `[{"type":"file","url":"data:image/png;base64,@@@@"}]`,
			`[{"type":"file","url":"data:;sha256=b0b7456273e0f200db1a1a615e716f665a7ea4628f94bed2f7f1304ef815213c;size=-1"}]`},
		{"not JSON", `{"type":"file","url":"data:,x"`, `{"type":"file","url":"data:,x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(compactFiles(json.RawMessage(tc.in)))
			if got != tc.want {
				t.Errorf("compactFiles(%s)\n = %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}
