// Command webhook is the extension of examples/extension-webhook: an HTTP
// extension that verifies turngate's signature on every delivery, adds a
// line to the system prompt on beforeTurn and counts tool calls on
// afterToolCall (GET /stats shows the counts).
//
// For the example's "echo" agent it also serves a stand-in model at
// /v1/chat/completions (OpenAI-compatible, streaming) that answers with
// the system prompt it was sent, so the example can show the extension's
// line reaching the model. A real extension needs only /hook.
//
//	WEBHOOK_SECRET=… webhook -listen 127.0.0.1:8090
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// systemLine is what beforeTurn adds to the system prompt.
const systemLine = "Answer in one short paragraph."

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set WEBHOOK_SECRET to the extension's secret in turngate.yaml")
	}
	h := &hook{secret: []byte(secret), toolCalls: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("POST /hook", h)
	mux.HandleFunc("GET /stats", h.stats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /v1/chat/completions", echoModel)
	log.Printf("webhook extension listening on http://%s", *listen)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// hook is the extension.
type hook struct {
	secret []byte

	mu        sync.Mutex
	turns     int
	toolCalls map[string]int
	rejected  int
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	// Reject anything turngate did not sign, or signed too long ago.
	if err := verify(h.secret, r.Header.Get("X-Turngate-Signature"), body, time.Now()); err != nil {
		h.mu.Lock()
		h.rejected++
		h.mu.Unlock()
		log.Printf("rejected a delivery: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var env struct {
		ID        uint64          `json:"id"`
		Hook      string          `json:"hook"`
		RequestID string          `json:"requestId"`
		Snapshot  json.RawMessage `json:"snapshot"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, "not an envelope", http.StatusBadRequest)
		return
	}
	log.Printf("delivery %d: %s %s", env.ID, env.Hook, env.Snapshot)
	switch env.Hook {
	case "beforeTurn":
		var snap struct {
			System string `json:"system"`
		}
		_ = json.Unmarshal(env.Snapshot, &snap)
		h.mu.Lock()
		h.turns++
		h.mu.Unlock()
		// maxSteps 20 asks for more steps than the rules allow: the
		// gateway keeps the rules' cap.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{
			"system":   snap.System + "\n" + systemLine,
			"maxSteps": 20,
		}})
	case "afterToolCall":
		var snap struct {
			ToolName string `json:"toolName"`
		}
		_ = json.Unmarshal(env.Snapshot, &snap)
		h.mu.Lock()
		h.toolCalls[snap.ToolName]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// verify checks turngate's signature, "t=<unix seconds>,v1=<hex>": the
// hex HMAC-SHA256, keyed with the secret, of the timestamp, a dot and the
// body, compared in constant time; a timestamp more than five minutes
// away is a replay. (Go extensions can call turngate's
// extension.Verify instead; this example keeps to the standard library.)
func verify(secret []byte, header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	got, herr := hex.DecodeString(sig)
	if err != nil || herr != nil {
		return errors.New("no valid signature header")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("signature does not match")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("signature too old")
	}
	return nil
}

// stats shows what the extension counted.
func (h *hook) stats(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"turns": h.turns, "toolCalls": h.toolCalls, "rejected": h.rejected})
}

// echoModel is the stand-in model: it streams back the system prompt of
// the request as its answer.
func echoModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	system := ""
	for _, m := range req.Messages {
		if s, ok := m.Content.(string); ok && m.Role == "system" {
			system = s
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, delta := range []string{
		`{"role":"assistant","content":` + quote("My system prompt: "+system) + `}`,
		`{}`,
	} {
		finish := "null"
		if delta == `{}` {
			finish = `"stop"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"echo\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"echo\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
