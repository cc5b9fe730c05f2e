package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/turngate/turngate/internal/jsonstr"
)

// Client frame types of the ai package's WebSocketChatTransport
// (protocols.md A.14).
const (
	wsSend   = "send"
	wsResume = "resume"
	wsAbort  = "abort"
)

// maxRequestIDLen bounds a client's requestId: the transport's ids are 16
// characters; the bound keeps an error frame's echo small.
const maxRequestIDLen = 128

// wsFrame is one decoded client frame.
type wsFrame struct {
	Type      string
	RequestID string
	// Chat is a send frame's request: id, messages, trigger, messageId,
	// and its body as the custom body.
	Chat *chatRequest
	// SessionID is a resume frame's chat id.
	SessionID string
	// From is the index of the first chunk a resume replays:
	// lastSequence+1, or 0 when absent.
	From int
	// Headers are the frame's headers, keys lower-cased as the transport
	// sends them.
	Headers map[string]string
}

// decodeWSFrame parses and checks one client frame. It is the parser of
// untrusted WebSocket input (fuzzed). On error the returned frame carries
// the requestId when it could be read, so the error frame can name it.
func decodeWSFrame(data []byte, maxMessages int) (*wsFrame, error) {
	f := &wsFrame{}
	if !utf8.Valid(data) {
		return f, errorf(http.StatusBadRequest, CodeInvalidJSON, "frame is not valid UTF-8")
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return f, errorf(http.StatusBadRequest, CodeInvalidJSON, "frame must be a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return f, jsonError(err)
	}
	if raw, ok := fields["requestId"]; ok {
		var id string
		if json.Unmarshal(raw, &id) == nil && id != "" && len(id) <= maxRequestIDLen {
			f.RequestID = id
		}
	}
	if err := decodeField(fields["type"], "type", &f.Type); err != nil || f.Type == "" {
		return f, errField("type", "must be %q, %q or %q", wsSend, wsResume, wsAbort)
	}
	if f.RequestID == "" {
		return f, errField("requestId", "must be a string of 1-%d characters", maxRequestIDLen)
	}
	switch f.Type {
	case wsAbort:
		return f, nil
	case wsSend, wsResume:
	default:
		return f, errField("type", "must be %q, %q or %q, not %q", wsSend, wsResume, wsAbort, f.Type)
	}
	var body map[string]any
	for key, raw := range fields {
		if string(raw) == "null" {
			continue
		}
		var err error
		switch key {
		case "headers":
			err = decodeField(raw, key, &f.Headers)
		case "body":
			err = decodeField(raw, key, &body)
		}
		if err != nil {
			return f, err
		}
	}
	f.Headers = wsLowerKeys(f.Headers)
	if f.Type == wsResume {
		return f, decodeResume(f, fields)
	}
	req := &chatRequest{Trigger: triggerSubmit}
	for key, dst := range map[string]*string{"id": &req.ID, "trigger": &req.Trigger, "messageId": &req.MessageID} {
		if raw, ok := fields[key]; ok && string(raw) != "null" {
			if err := decodeField(raw, key, dst); err != nil {
				return f, err
			}
		}
	}
	if raw, ok := fields["messages"]; ok {
		if err := decodeField(raw, "messages", &req.Messages); err != nil {
			return f, err
		}
	}
	if len(body) > 0 {
		req.Body = body
	}
	if err := req.validate(maxMessages); err != nil {
		return f, err
	}
	f.Chat = req
	return f, nil
}

// decodeResume reads a resume frame's chat id and lastSequence.
func decodeResume(f *wsFrame, fields map[string]json.RawMessage) error {
	if err := decodeField(fields["id"], "id", &f.SessionID); err != nil || f.SessionID == "" {
		return errField("id", "the chat id is required")
	}
	if raw, ok := fields["lastSequence"]; ok && string(raw) != "null" {
		var last int
		if err := json.Unmarshal(raw, &last); err != nil || last < 0 || last >= math.MaxInt32 {
			return errField("lastSequence", "must be an integer of at least 0")
		}
		f.From = last + 1
	}
	return nil
}

// Server frames (protocols.md A.14). Each is one JSON text message.

// wsControlFrame encodes a start, end or no-active frame.
func wsControlFrame(typ, requestID string) []byte {
	b := append(make([]byte, 0, 32+len(requestID)), `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","requestId":`...)
	b = jsonstr.AppendHTMLEscaped(b, requestID)
	return append(b, '}')
}

// wsChunkPrefix is the start of requestID's chunk frames, up to the
// sequence number.
func wsChunkPrefix(requestID string) []byte {
	b := append([]byte(`{"type":"chunk","requestId":`), jsonstr.AppendHTMLEscaped(nil, requestID)...)
	return append(b, `,"sequence":`...)
}

// wsChunkFrame wraps one UI message stream chunk (the JSON of an SSE
// frame, without "data: " and the blank line) in a chunk frame.
func wsChunkFrame(prefix []byte, sequence int, chunk []byte) []byte {
	b := make([]byte, 0, len(prefix)+len(chunk)+32)
	b = append(b, prefix...)
	b = strconv.AppendInt(b, int64(sequence), 10)
	b = append(b, `,"chunk":`...)
	b = append(b, chunk...)
	return append(b, '}')
}

// wsErrorFrame is the error frame of a request that failed: errorText is
// the message an HTTP client would get in the JSON error body, and code,
// status and retryAfterMs (fields the transport ignores) say what the
// HTTP status would have been.
func wsErrorFrame(requestID string, err error) []byte {
	ae := toAPIError(err)
	v := map[string]any{"type": "error", "requestId": requestID, "errorText": ae.Message, "code": ae.Code, "status": ae.Status}
	if ae.RetryAfter > 0 {
		v["retryAfterMs"] = ae.RetryAfter.Milliseconds()
	}
	b, _ := json.Marshal(v) // strings and numbers only: cannot fail
	return b
}

// sseChunk returns the JSON chunk of an SSE data frame, and false for the
// [DONE] frame (or anything that is not a data frame).
func sseChunk(frame []byte) ([]byte, bool) {
	chunk, ok := bytes.CutPrefix(frame, []byte("data: "))
	if !ok {
		return nil, false
	}
	chunk = bytes.TrimRight(chunk, "\n")
	if string(chunk) == "[DONE]" {
		return nil, false
	}
	return chunk, true
}

// wsLowerKeys returns h with its keys lower-cased, as the transport sends
// them and the gateway reads them.
func wsLowerKeys(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}
