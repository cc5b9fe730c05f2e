package uistream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/turngate/turngate/engine"
)

// marshalFrame is Frame as it was before AppendFrame: json.Marshal, which
// calls engine.Event.MarshalJSON and escapes its output for HTML, between
// "data: " and "\n\n". AppendFrame must write the same bytes.
func marshalFrame(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding stream chunk: %w", err)
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n'), nil
}

// eventTypes are every chunk type engine.Event.MarshalJSON knows, plus
// types it writes with every set field.
var eventTypes = []string{
	engine.EventStart, engine.EventStartStep, engine.EventFinishStep,
	engine.EventTextStart, engine.EventTextDelta, engine.EventTextEnd,
	engine.EventReasoningStart, engine.EventReasoningDelta, engine.EventReasoningEnd,
	engine.EventToolInputStart, engine.EventToolInputDelta, engine.EventToolInputAvailable,
	engine.EventToolInputError, engine.EventToolOutputAvailable, engine.EventToolOutputError,
	engine.EventFinish, engine.EventError, engine.EventAbort, engine.EventMessageMetadata,
	"data-weather", "", "<text-delta>",
}

// edgeStrings exercise every escaping rule: JSON.stringify's (quotes,
// backslashes, control characters, invalid UTF-8) and json.Marshal's HTML
// escaping on top.
var edgeStrings = []string{
	"",
	"The gateway rela",
	`"quoted" \ back\slash / slash`,
	"<script>alert('x')</script> & &amp;",
	"\b\f\n\r\t\x00\x01\x1f\x7f",
	"line\u2028para\u2029end",
	"é 日本 🎉 \ufffd",
	"a\xffb",
	"\xe2\x80",             // a truncated U+2028
	"\xe2\x80\xa8\xe2\x80", // U+2028 then a truncated one
	"\xed\xa0\x80",         // an encoded surrogate
	"\xf0\x9f\x8e",         // a truncated emoji
	"\xc0\xaf",             // an overlong '/'
	"\\u2028 <\\u003c",
}

// edgeRaws are inputs, outputs and metadata: valid JSON with spaces, HTML
// characters, U+2028, escapes and invalid UTF-8 inside strings, and
// invalid JSON that json.Marshal rejects.
var edgeRaws = []json.RawMessage{
	nil,
	json.RawMessage(`{"city":"Paris"}`),
	json.RawMessage("  {\n\t\"city\" : \"Paris\",\r\n \"days\" : [ 1 , 2.5e3 , -0 ] ,\"ok\":true,\"x\":null }\n"),
	json.RawMessage(`{"html":"<b>&amp;</b>","<k>":"v"}`),
	json.RawMessage("\"para\u2028graph\u2029\" "),
	json.RawMessage(`"esc \" \\ \/ \b\f\n\r\t \u0000 \u2028 \ud83c\udf89"`),
	json.RawMessage("{\"bad utf8\":\"\xff\xfe\xe2\x80\",\"k\":\"\xe2\x80\xa9\"}"),
	json.RawMessage(`[[[[{"a":[{}]}]]],[],{}]`),
	json.RawMessage(`null`),
	json.RawMessage(`0`),
	json.RawMessage(`""`),
	json.RawMessage(`{bad`),
	json.RawMessage(`  `),
	json.RawMessage("\"tab\tinside\""),
	json.RawMessage(`{"a":1} {"b":2}`),
	json.RawMessage(`[1,2,]`),
}

// checkFrame fails t if Frame, EventFrame or AppendFrame writes anything
// but what marshalFrame does for ev, or fails differently.
func checkFrame(t *testing.T, ev engine.Event) {
	t.Helper()
	want, wantErr := marshalFrame(ev)
	got, err := Frame(ev)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("Frame(%#v) error\n%v\nwant\n%v", ev, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Frame(%#v)\n%q\nwant\n%q", ev, got, want)
	}
	if got, _ := EventFrame(ev); !bytes.Equal(got, want) {
		t.Fatalf("EventFrame(%#v)\n%q\nwant\n%q", ev, got, want)
	}
	prefix := []byte("data: [earlier]\n\n")
	got, err = AppendFrame(prefix, ev)
	if err != nil {
		want = prefix // AppendFrame leaves dst as it was
	} else {
		want = append(prefix, want...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendFrame(%#v)\n%q\nwant\n%q", ev, got, want)
	}
}

// TestFrameMatchesMarshal checks every event type with every field set to
// each edge string and raw value, one field at a time and all together.
func TestFrameMatchesMarshal(t *testing.T) {
	for _, typ := range eventTypes {
		t.Run(typ, func(t *testing.T) {
			checkFrame(t, engine.Event{Type: typ})
			for _, s := range edgeStrings {
				for _, ev := range []engine.Event{
					{Type: typ, MessageID: s}, {Type: typ, ID: s}, {Type: typ, Delta: s},
					{Type: typ, ToolCallID: s}, {Type: typ, ToolName: s}, {Type: typ, InputTextDelta: s},
					{Type: typ, ErrorText: s}, {Type: typ, FinishReason: s}, {Type: s + typ},
					eventWith(typ, s, s, nil),
				} {
					checkFrame(t, ev)
				}
			}
			for _, raw := range edgeRaws {
				for _, ev := range []engine.Event{
					{Type: typ, Input: raw}, {Type: typ, Output: raw}, {Type: typ, MessageMetadata: raw},
					eventWith(typ, "id", "<&>", raw),
				} {
					checkFrame(t, ev)
				}
			}
			for _, flags := range []uint8{0, 1, 2, 3} {
				ev := eventWith(typ, "c", "x", json.RawMessage(`{}`))
				ev.Dynamic, ev.ProviderExecuted = flags&1 != 0, flags&2 != 0
				checkFrame(t, ev)
			}
		})
	}
}

// TestFrameSizes checks frames around the scratch size EventFrame encodes
// into on the stack, and that each frame's slice is its own.
func TestFrameSizes(t *testing.T) {
	for _, n := range []int{0, 1, frameScratch - frameOverhead - 40, frameScratch - 64, frameScratch, frameScratch + 1, 4 * frameScratch} {
		delta := bytes.Repeat([]byte("<a>"), n/3)
		ev := engine.Event{Type: engine.EventTextDelta, ID: "text_0", Delta: string(delta)}
		checkFrame(t, ev)
		out := json.RawMessage(`{"s":"` + string(delta) + `"}`)
		checkFrame(t, engine.Event{Type: engine.EventToolOutputAvailable, ToolCallID: "c", Output: out})
	}
	a, _ := EventFrame(engine.Event{Type: engine.EventTextDelta, ID: "a", Delta: "one"})
	b, _ := EventFrame(engine.Event{Type: engine.EventTextDelta, ID: "b", Delta: "two"})
	if string(a) != "data: {\"type\":\"text-delta\",\"id\":\"a\",\"delta\":\"one\"}\n\n" || cap(a) > 64 || &a[0] == &b[0] {
		t.Errorf("frames %q (cap %d) and %q share or waste memory", a, cap(a), b)
	}
}

// TestFrameOtherValues checks that values other than engine.Event are
// still written by json.Marshal, errors included.
func TestFrameOtherValues(t *testing.T) {
	for _, v := range []any{
		map[string]string{"type": "start", "html": "<&>"},
		&engine.Event{Type: engine.EventTextDelta, ID: "t", Delta: "<ptr>"},
		[]int{1, 2},
		nil,
		func() {},
	} {
		want, wantErr := marshalFrame(v)
		got, err := Frame(v)
		if !bytes.Equal(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("Frame(%T) = %q, %v; want %q, %v", v, got, err, want, wantErr)
		}
	}
}

// eventWith returns an event of typ with every field set: s in the
// identifiers, text in the texts and raw as input, output and metadata.
func eventWith(typ, s, text string, raw json.RawMessage) engine.Event {
	return engine.Event{Type: typ, MessageID: s, ID: s, Delta: text, ToolCallID: s, ToolName: s,
		InputTextDelta: text, Input: raw, Output: raw, ErrorText: text, FinishReason: s, MessageMetadata: raw}
}

// FuzzFrame checks that AppendFrame writes what json.Marshal does for
// events built from fuzzed strings and raw JSON. It is seeded with the
// engine's recorded AI SDK streams and the edge cases above.
func FuzzFrame(f *testing.F) {
	for _, name := range []string{"server-tool.golden", "client-tool.golden"} {
		file, err := os.Open(filepath.Join("..", "..", "engine", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		lines := bufio.NewScanner(file)
		for lines.Scan() {
			var ev engine.Event
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				f.Fatalf("%s: %v", name, err)
			}
			text := ev.Delta + ev.InputTextDelta + ev.ErrorText
			f.Add(ev.Type, ev.ID+ev.ToolCallID+ev.MessageID, text, []byte(ev.Input), []byte(ev.Output), uint8(0))
		}
		file.Close()
	}
	for i, s := range edgeStrings {
		raw := edgeRaws[i%len(edgeRaws)]
		f.Add(eventTypes[i%len(eventTypes)], s, s, []byte(raw), []byte(nil), uint8(i))
	}
	f.Fuzz(func(t *testing.T, typ, s, text string, raw, raw2 []byte, flags uint8) {
		// flags picks a known type most of the time, as the engine emits
		// only those, and sets the booleans.
		if i := int(flags>>2) % (len(eventTypes) + 8); i < len(eventTypes) {
			typ = eventTypes[i]
		}
		ev := eventWith(typ, s, text, raw)
		ev.Output = raw2
		ev.Dynamic, ev.ProviderExecuted = flags&1 != 0, flags&2 != 0
		checkFrame(t, ev)
	})
}
