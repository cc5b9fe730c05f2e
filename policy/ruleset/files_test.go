package ruleset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/dataurl"
	"github.com/turngate/turngate/policy/celrules"
)

// compactFiles replaces the data: URLs of file parts only, and leaves an
// input without them byte for byte.
func TestCompactFiles(t *testing.T) {
	// sha256("hello") and sha256 of the unparsable URL "data:image/png;base64,@@@@".
	const hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	// standIn is the stand-in of "hello" as text/plain, and helloPart a
	// one-part input whose file is that.
	const standIn = "data:text/plain;sha256=" + hello + ";size=5"
	const helloPart = `[{"type":"file","url":"` + standIn + `"}]`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no data URL", `{"b":1,"a":"x"}`, `{"b":1,"a":"x"}`},
		{"data URL in text is kept", `{"type":"text","text":"data:,hi","z":1}`, `{"type":"text","text":"data:,hi","z":1}`},
		{"url of a non-file part is kept", `{"type":"link","url":"data:,hi"}`, `{"type":"link","url":"data:,hi"}`},
		{"base64", `{"m":[{"type":"file","mediaType":"text/plain","url":"data:text/plain;base64,aGVsbG8=","n":1.50}]}`,
			`{"m":[{"mediaType":"text/plain","n":1.50,"type":"file","url":"` + standIn + `"}]}`},
		{"percent-encoded", `[{"type":"file","url":"data:text/plain,h%65llo"}]`, helloPart},
		{"upper-case scheme and encoding", `[{"type":"file","url":"DATA:text/plain;BASE64,aGVsbG8="}]`, helloPart},
		{"mixed-case scheme and media type", `{"body":{"type":"file","url":"Data:Text/Plain;Base64,aGVsbG8="}}`,
			`{"body":{"type":"file","url":"` + standIn + `"}}`},
		{"upper-case encoding", `[{"type":"file","url":"data:text/plain;BASE64,aGVsbG8="}]`, helloPart},
		{"text that mentions data: is kept", `[{"type":"file","url":"see data:,hi","name":"metadata:a,b"}]`,
			`[{"type":"file","url":"see data:,hi","name":"metadata:a,b"}]`},
		{"remote URL is kept", `[{"type":"file","url":"https://example.com/data:x"}]`, `[{"type":"file","url":"https://example.com/data:x"}]`},
		{"unparsable", `[{"type":"file","url":"data:image/png;base64,@@@@"}]`,
			`[{"type":"file","url":"data:;sha256=b0b7456273e0f200db1a1a615e716f665a7ea4628f94bed2f7f1304ef815213c;size=-1"}]`},
		{"not JSON", `{"type":"file","url":"data:,x"`, `{"type":"file","url":"data:,x"`},
		{"stand-in is kept", `{"type":"file","z":1,"url":"` + standIn + `"}`,
			`{"type":"file","z":1,"url":"` + standIn + `"}`},
		{"stand-in and data URL", `[{"type":"file","url":"` + standIn + `"},{"type":"file","url":"data:text/plain,hello"}]`,
			`[{"type":"file","url":"` + standIn + `"},{"type":"file","url":"` + standIn + `"}]`},
		{"escaped quote before the comma", `[{"type":"file","url":"data:a\"b,hello"}]`,
			`[{"type":"file","url":"data:;sha256=` + sha256Hex(`data:a"b,hello`) + `;size=-1"}]`},
		{"HTML escapes are kept", `{"text":"\u003cb\u003e \u0026 data:,x","type":"file"}`,
			`{"text":"\u003cb\u003e \u0026 data:,x","type":"file"}`},
		// Raw JSON kept as the client sent it may spell the scheme with
		// escapes, each of its characters in either case and hex case.
		{"escaped d", `[{"type":"file","url":"\u0064ata:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped D", `[{"type":"file","url":"\u0044ATA:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped a", `[{"type":"file","url":"d\u0061ta:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped A", `[{"type":"file","url":"D\u0041TA:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped t", `[{"type":"file","url":"da\u0074a:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped T", `[{"type":"file","url":"DA\u0054A:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped last a", `[{"type":"file","url":"dat\u0061:text/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped colon", `[{"type":"file","url":"data\u003atext/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped colon in upper-case hex", `[{"type":"file","url":"data\u003Atext/plain;base64,aGVsbG8="}]`, helloPart},
		{"escaped scheme", `[{"type":"file","url":"\u0064\u0061\u0074\u0061\u003a,hello"}]`,
			`[{"type":"file","url":"data:;sha256=` + hello + `;size=5"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(new(standIns).compactFiles(json.RawMessage(tc.in)))
			if got != tc.want {
				t.Errorf("compactFiles(%s)\n = %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

// sha256Hex is the lowercase hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// compactInput renders a CEL input as compactFiles rewrites its full
// rendering, without touching the turn's messages, and hashes each file
// once however many records and messages hold it.
func TestCompactInput(t *testing.T) {
	png := dataurl.Encode("image/png", bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 1000))
	msgs := []engine.ModelMessage{
		{Role: "system", Content: []engine.ContentPart{{Type: engine.ContentText, Text: "data:,not a file"}}},
		{Role: "user", Content: []engine.ContentPart{
			{Type: engine.ContentText, Text: "these?"},
			{Type: engine.ContentFile, MediaType: "image/png", URL: png, Filename: "a.png"},
			{Type: engine.ContentFile, MediaType: "text/plain", URL: "data:text/plain,h%65llo"},
			{Type: engine.ContentFile, MediaType: "image/png", URL: "https://example.com/b.png"}}},
	}
	tc := &engine.TurnContext{Identity: identity, Messages: msgs, MaxSteps: 4,
		Body: map[string]any{"extra": map[string]any{"type": "file", "url": png}}}
	now := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	var files standIns
	for _, in := range []*celrules.Input{
		celrules.TurnInput(tc, now),
		celrules.StepInput(&engine.PrepareStepContext{Identity: identity, StepNumber: 1, Messages: msgs[1:], Turn: tc}, now),
	} {
		full, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeJSON(t, new(standIns).compactFiles(full))
		got := decodeJSON(t, files.compactFiles(orNil(json.Marshal(files.compactInput(in)))))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("compactInput renders\n%v\nwant\n%v", got, want)
		}
	}
	if msgs[1].Content[1].URL != png || msgs[1].Content[2].URL != "data:text/plain,h%65llo" {
		t.Error("compactInput changed the turn's messages")
	}
	if len(files.m) != 2 {
		t.Errorf("%d files hashed, want 2 (each once)", len(files.m))
	}
}

// decodeJSON decodes a JSON document, numbers as json.Number.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// mayHoldDataURL finds every string that may be a data: URL and passes
// over stand-ins.
func TestMayHoldDataURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":"x"}`, false},
		{`{"url":"data:image/png;sha256=ab;size=3"}`, false},
		{`{"url":"data:image/png;sha256=ab;size=3","b":"data:,x"}`, true},
		{`{"url":"data:text/plain,hi"}`, true},
		{`{"url":"data:a\",b"}`, true},
		{`{"url":"data:unterminated`, true},
		{`{"url":"DATA:text/plain;BASE64,aGk="}`, true},
		{`{"url":"dAtA:,x"}`, true},
		{`{"url":"DATA:image/png;sha256=ab;size=3"}`, false},
		{`{"data":"a,b"}`, false},
		{`{"text":"metadata:a,b"}`, false},
		{`{"text":"see data:,x"}`, false},
		{`"data:,x"`, true},
		{`data:,x`, false},
		{`{"url":"\u0064ata:,x"}`, true},
		{`{"url":"\u0044ata:,x"}`, true},
		{`{"url":"d\u0061ta:,x"}`, true},
		{`{"url":"d\u0041ta:,x"}`, true},
		{`{"url":"da\u0074a:,x"}`, true},
		{`{"url":"da\u0054a:,x"}`, true},
		{`{"url":"data\u003a,x"}`, true},
		{`{"url":"data\u003A,x"}`, true},
		{`{"text":"\u003cb\u003e \u0026 \u0027 \u2028"}`, false},
		{`{"text":"\u00"}`, false},
		{`{"text":"\u006`, false},
	} {
		if got := mayHoldDataURL([]byte(tc.in)); got != tc.want {
			t.Errorf("mayHoldDataURL(%s) = %t, want %t", tc.in, got, tc.want)
		}
	}
}

// TestCompactFilesDoesNotAllocate checks the cheap test: an input without
// a data: URL (its files already stand-ins, "data" and "data:" only in
// keys and text, escapes only of HTML characters) is passed over without
// an allocation.
func TestCompactFilesDoesNotAllocate(t *testing.T) {
	in := json.RawMessage(`{"turn":{"data":{"k":"metadata:a,b"},"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"see data:,x \u003cb\u003e"},{"type":"file","url":"DATA:image/png;sha256=ab;size=3"}]}]}}`)
	var files standIns
	allocs := testing.AllocsPerRun(100, func() {
		if out := files.compactFiles(in); &out[0] != &in[0] {
			t.Fatal("compactFiles rewrote an input without a data: URL")
		}
	})
	if allocs != 0 {
		t.Errorf("compactFiles allocates %v times, want 0", allocs)
	}
}

// FuzzCompactFiles checks mayHoldDataURL against the rewrite it spares:
// an input it passes over is one rewriteFiles leaves as it is, whether
// the scheme is spelt plainly or with escapes.
func FuzzCompactFiles(f *testing.F) {
	for _, s := range []string{
		`[{"type":"file","url":"data:text/plain;base64,aGVsbG8="}]`,
		`[{"type":"file","url":"DATA:text/plain;BASE64,aGVsbG8="}]`,
		`{"body":{"type":"file","url":"Data:Text/Plain;Base64,aGVsbG8="}}`,
		`[{"type":"file","url":"data:text/plain;sha256=ab;size=5"},{"type":"file","url":"dAtA:,hello"}]`,
		`[{"type":"file","url":"see data:,hi","name":"metadata:a,b"}]`,
		`{"data":"a,b","type":"file","url":"data:"}`,
		`[{"type":"file","url":"\u0064ata:text/plain;base64,aGVsbG8="}]`,
		`[{"type":"file","url":"D\u0041TA:,hello"}]`,
		`[{"type":"file","url":"data\u003Atext/plain,hello"}]`,
		`[{"t\u0079pe":"file","\u0075rl":"data:,h\u002cello"}]`,
		`{"text":"\u003cb\u003e \u0026 data:,x","type":"file","url":"\u003c"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if mayHoldDataURL([]byte(in)) {
			return
		}
		if got := new(standIns).rewriteFiles(json.RawMessage(in)); string(got) != in {
			t.Fatalf("mayHoldDataURL(%s) = false, but rewriteFiles gives %s", in, got)
		}
	})
}
