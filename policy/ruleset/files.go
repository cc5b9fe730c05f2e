package ruleset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/dataurl"
	"github.com/turngate/turngate/policy/celrules"
)

// dataURLStart is what precedes the scheme's colon in a recorded input
// where some string starts with a data: URL, in any case (URL schemes are
// case-insensitive: "DATA:" and "Data:" are data: URLs too): the cheap
// test that spares inputs without inline files the rewrite.
var dataURLStart = []byte(`"data`)

// maxStandIns bounds the stand-ins one turn's hooks keep: a turn with more
// distinct inline files than this hashes the others each time it records
// them, and hooks kept longer than a turn hold no more than this many URLs.
const maxStandIns = 64

// standIns memoizes the stand-ins (fileStandIn) of one turn's inline files
// by data URL: a file is in every CEL record of its turn (turn.messages of
// beforeTurn and of each beforeStep, and step.messages), and is decoded
// and hashed once per turn. The zero value is ready; it is safe for
// concurrent use.
type standIns struct {
	mu sync.Mutex
	m  map[string]string
}

// of returns the stand-in of the data: URL url.
func (s *standIns) of(url string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[url]; ok {
		return v
	}
	v := fileStandIn(url)
	if len(s.m) < maxStandIns {
		if s.m == nil {
			s.m = map[string]string{}
		}
		s.m[url] = v
	}
	return v
}

// inlineFile reports whether url is a data: URL (a file part's content),
// not a stand-in, which has no comma.
func inlineFile(url string) bool {
	return dataurl.Is(url) && strings.IndexByte(url, ',') >= 0
}

// compactInput returns the CEL input in with the data: URL of every file
// part in its turn's and step's messages replaced by its stand-in, before
// the input is rendered: the file's content is then neither encoded into
// the record's JSON nor decoded from it again (compactFiles finds no data:
// URL there). Only the messages that change are copied.
func (s *standIns) compactInput(in *celrules.Input) *celrules.Input {
	out := *in
	if in.Turn != nil {
		if msgs, ok := s.compactMessages(in.Turn.Messages); ok {
			turn := *in.Turn
			turn.Messages = msgs
			out.Turn = &turn
		}
	}
	if in.Step != nil {
		if msgs, ok := s.compactMessages(in.Step.Messages); ok {
			step := *in.Step
			step.Messages = msgs
			out.Step = &step
		}
	}
	return &out
}

// compactMessages returns msgs with the data: URL of every file part
// replaced by its stand-in, and whether any was; msgs itself is not
// modified.
func (s *standIns) compactMessages(msgs []engine.ModelMessage) ([]engine.ModelMessage, bool) {
	var out []engine.ModelMessage
	for i, m := range msgs {
		var content []engine.ContentPart
		for j, p := range m.Content {
			if p.Type != engine.ContentFile || !inlineFile(p.URL) {
				continue
			}
			if content == nil {
				content = slices.Clone(m.Content)
			}
			content[j].URL = s.of(p.URL)
		}
		if content == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i].Content = content
	}
	return out, out != nil
}

// compactFiles returns in with the data: URL of every file part (an
// object whose "type" is "file") replaced by its stand-in (fileStandIn),
// so a decision record holds no file content and does not grow by the
// file's size. in is returned unchanged when it has no such part or does
// not decode. The rewritten document's object keys are sorted (it is
// marshaled again); numbers keep their text.
func (s *standIns) compactFiles(in json.RawMessage) json.RawMessage {
	if !mayHoldDataURL(in) {
		return in
	}
	return s.rewriteFiles(in)
}

// rewriteFiles is compactFiles without its cheap test: it decodes in
// whole.
func (s *standIns) rewriteFiles(in json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil || !s.compactValue(doc) {
		return in
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return in
	}
	return out
}

// mayHoldDataURL reports whether the JSON document in may hold a data:
// URL: a string that starts with "data:" in any case and has a comma
// before its end (or an escape, which it does not look past), or a string
// that may spell the scheme with escapes (escapesSchemeChar). Stand-ins
// have no comma, so an input whose files compactInput replaced is not
// decoded again. It looks for colons, which base64 never holds: a file's
// payload is passed over in one IndexByte and one Index, and nothing is
// allocated.
func mayHoldDataURL(in []byte) bool {
	return holdsSchemeColon(in) || escapesSchemeChar(in)
}

// holdsSchemeColon is mayHoldDataURL for a scheme spelt without escapes:
// it finds each colon and looks back for `"data` in any case.
func holdsSchemeColon(in []byte) bool {
	for {
		i := bytes.IndexByte(in, ':')
		if i < 0 {
			return false
		}
		start := in[:i]
		in = in[i+1:]
		if len(start) < len(dataURLStart) || !bytes.EqualFold(start[len(start)-len(dataURLStart):], dataURLStart) {
			continue
		}
		end := bytes.IndexAny(in, "\",\\")
		if end < 0 || in[end] != '"' {
			return true
		}
		in = in[end:]
	}
}

// asciiEscape is how a JSON escape of an ASCII character starts; its two
// hex digits follow.
var asciiEscape = []byte(`\u00`)

// escapesSchemeChar reports whether in holds a JSON escape of one of the
// data: scheme's characters (d, a, t or the colon, either case, in hex of
// either case): raw JSON kept as the client sent it may spell the scheme
// so ("\u0064ata:", "data\u003a"), which holdsSchemeColon does not see
// and the decoding rewrite does. Other escapes, such as the \u003c,
// \u003e and \u0026 that encoding/json writes for HTML characters, keep
// an input on the fast path. An escaped backslash followed by "u0064"
// counts too: it only costs a decode that finds nothing.
func escapesSchemeChar(in []byte) bool {
	for {
		i := bytes.Index(in, asciiEscape)
		if i < 0 {
			return false
		}
		in = in[i+len(asciiEscape):]
		if len(in) < 2 {
			return false
		}
		switch string(in[:2]) {
		case "64", "44", "61", "41", "74", "54", "3a", "3A":
			return true
		}
	}
}

// compactValue replaces the data: URLs of the file parts within v in
// place and reports whether it replaced any.
func (s *standIns) compactValue(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if url, ok := v["url"].(string); ok && v["type"] == "file" && inlineFile(url) {
			v["url"] = s.of(url)
			changed = true
		}
		for _, e := range v {
			changed = s.compactValue(e) || changed
		}
	case []any:
		for _, e := range v {
			changed = s.compactValue(e) || changed
		}
	}
	return changed
}

// fileStandIn is what a decision record holds in place of the data: URL
// s: "data:<mediaType>;sha256=<hex>;size=<bytes>", the sha256 and size
// of the decoded file. It has no comma, so it is not a data: URL and
// nothing reads it as file content. A URL that does not parse (the
// gateway refuses those) gets the sha256 of the URL itself and size -1.
func fileStandIn(s string) string {
	u, err := dataurl.Parse(s)
	var b []byte
	if err == nil {
		b, err = u.Bytes()
	}
	if err != nil {
		sum := sha256.Sum256([]byte(s))
		return "data:;sha256=" + hex.EncodeToString(sum[:]) + ";size=-1"
	}
	sum := sha256.Sum256(b)
	return "data:" + u.MediaType + ";sha256=" + hex.EncodeToString(sum[:]) + ";size=" + strconv.FormatInt(u.Size, 10)
}
