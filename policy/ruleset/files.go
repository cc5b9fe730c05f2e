package ruleset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/turngate/turngate/internal/dataurl"
)

// dataURLMarker is what a recorded input holds only when some string in
// it starts with a data: URL: the cheap test that spares inputs without
// inline files the rewrite.
var dataURLMarker = []byte(`"data:`)

// compactFiles returns in with the data: URL of every file part (an
// object whose "type" is "file") replaced by its stand-in (fileStandIn),
// so a decision record holds no file content and does not grow by the
// file's size. in is returned unchanged when it has no such part or does
// not decode. The rewritten document's object keys are sorted (it is
// marshaled again); numbers keep their text.
func compactFiles(in json.RawMessage) json.RawMessage {
	if !bytes.Contains(in, dataURLMarker) {
		return in
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil || !compactValue(doc) {
		return in
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return in
	}
	return out
}

// compactValue replaces the data: URLs of the file parts within v in
// place and reports whether it replaced any.
func compactValue(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if url, ok := v["url"].(string); ok && v["type"] == "file" && dataurl.Is(url) {
			v["url"] = fileStandIn(url)
			changed = true
		}
		for _, e := range v {
			changed = compactValue(e) || changed
		}
	case []any:
		for _, e := range v {
			changed = compactValue(e) || changed
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
