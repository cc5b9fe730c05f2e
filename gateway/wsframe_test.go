package gateway

import (
	"encoding/json"
	"errors"
	"testing"
)

// wsSeedFrames are client frames as WebSocketChatTransport sends them,
// and broken ones.
var wsSeedFrames = []string{
	`{"type":"send","requestId":"Zq3","id":"chat-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}],"headers":{"authorization":"Bearer k"},"body":{"mode":"x"}}`,
	`{"type":"send","requestId":"Zq4","id":"chat-1","trigger":"submit-message","messageId":"msg_1","messages":[{"id":"msg_1","role":"assistant","parts":[{"type":"tool-getLocation","toolCallId":"c1","state":"output-available","input":{},"output":{"city":"Berlin"}}]}],"headers":{},"body":{}}`,
	`{"type":"resume","requestId":"Zq5","id":"chat-1","headers":{},"body":{}}`,
	`{"type":"resume","requestId":"Zq6","id":"chat-1","lastSequence":3}`,
	`{"type":"abort","requestId":"Zq3"}`,
	`{"type":"send","requestId":7}`,
	`{"type":"resume","requestId":"r","id":"s","lastSequence":-1}`,
	`[1,2]`, `{`, `null`, "",
}

func TestDecodeWSFrame(t *testing.T) {
	tests := []struct {
		name, frame string
		check       func(t *testing.T, f *wsFrame)
	}{
		{"send", wsSeedFrames[0], func(t *testing.T, f *wsFrame) {
			if f.Type != wsSend || f.RequestID != "Zq3" || f.Chat.ID != "chat-1" || f.Chat.Body["mode"] != "x" || len(f.Chat.Messages) != 1 {
				t.Errorf("frame %+v, chat %+v", f, f.Chat)
			}
			if f.Headers["authorization"] != "Bearer k" {
				t.Errorf("headers %v", f.Headers)
			}
		}},
		{"empty body is no body", `{"type":"send","requestId":"r","id":"s","messages":[{"role":"user","parts":[]}],"body":{}}`, func(t *testing.T, f *wsFrame) {
			if f.Chat.Body != nil || f.Chat.Trigger != triggerSubmit {
				t.Errorf("chat %+v", f.Chat)
			}
		}},
		{"header keys lower-cased", `{"type":"resume","requestId":"r","id":"s","headers":{"Authorization":"Bearer k"}}`, func(t *testing.T, f *wsFrame) {
			if f.Headers["authorization"] != "Bearer k" || len(f.Headers) != 1 {
				t.Errorf("headers %v", f.Headers)
			}
		}},
		{"resume from the start", wsSeedFrames[2], func(t *testing.T, f *wsFrame) {
			if f.Type != wsResume || f.SessionID != "chat-1" || f.From != 0 {
				t.Errorf("frame %+v", f)
			}
		}},
		{"resume after a sequence", wsSeedFrames[3], func(t *testing.T, f *wsFrame) {
			if f.From != 4 {
				t.Errorf("from %d, want 4", f.From)
			}
		}},
		{"abort", wsSeedFrames[4], func(t *testing.T, f *wsFrame) {
			if f.Type != wsAbort || f.RequestID != "Zq3" {
				t.Errorf("frame %+v", f)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeWSFrame([]byte(tc.frame), 10)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
	if _, err := decodeWSFrame([]byte(wsSeedFrames[0]), 0); err == nil || toAPIError(err).Code != CodeTooLarge {
		t.Errorf("more messages than the limit: %v, want request_too_large", err)
	}
}

// TestServerFrames: the server frames are the JSON the transport parses.
func TestServerFrames(t *testing.T) {
	const id = `r"<1>`
	for _, tc := range []struct {
		frame []byte
		want  map[string]any
	}{
		{wsControlFrame("start", id), map[string]any{"type": "start", "requestId": id}},
		{wsControlFrame("no-active", id), map[string]any{"type": "no-active", "requestId": id}},
		{wsChunkFrame(wsChunkPrefix(id), 12, []byte(`{"type":"text-delta","id":"t","delta":"x"}`)),
			map[string]any{"type": "chunk", "requestId": id, "sequence": float64(12), "chunk": map[string]any{"type": "text-delta", "id": "t", "delta": "x"}}},
		{wsErrorFrame(id, errQueueFull), map[string]any{"type": "error", "requestId": id, "code": CodeTooManyQueued, "status": float64(429),
			"retryAfterMs": float64(1000), "errorText": "too many turns are queued for this session; retry when the current turn has finished"}},
		{wsErrorFrame(id, errors.New("secret internals")), map[string]any{"type": "error", "requestId": id, "code": CodeInternal, "status": float64(500), "errorText": "internal error"}},
	} {
		var got map[string]any
		if err := json.Unmarshal(tc.frame, &got); err != nil {
			t.Fatalf("%s: %v", tc.frame, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(tc.want)
		if string(g) != string(w) {
			t.Errorf("frame %s\n got  %s\n want %s", tc.frame, g, w)
		}
	}
	for frame, want := range map[string]string{"data: {\"type\":\"start\"}\n\n": `{"type":"start"}`, "data: [DONE]\n\n": "", ": keep-alive\n\n": ""} {
		got, ok := sseChunk([]byte(frame))
		if string(got) != want || ok != (want != "") {
			t.Errorf("sseChunk(%q) = %q, %v", frame, got, ok)
		}
	}
}

// FuzzDecodeWSFrame: no client frame panics the parser, and an accepted
// send or resume frame carries what the request needs.
func FuzzDecodeWSFrame(f *testing.F) {
	for _, s := range wsSeedFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := decodeWSFrame(data, 50)
		if fr == nil {
			t.Fatal("nil frame")
		}
		if rejected(t, "frame", err) {
			_ = wsErrorFrame(fr.RequestID, err)
			return
		}
		if fr.RequestID == "" {
			t.Fatal("accepted a frame without a requestId")
		}
		switch fr.Type {
		case wsSend:
			if fr.Chat == nil || !validID(fr.Chat.ID) || len(fr.Chat.Messages) == 0 {
				t.Fatalf("accepted send %+v", fr.Chat)
			}
		case wsResume:
			if fr.SessionID == "" || fr.From < 0 {
				t.Fatalf("accepted resume %+v", fr)
			}
		case wsAbort:
		default:
			t.Fatalf("accepted type %q", fr.Type)
		}
	})
}
