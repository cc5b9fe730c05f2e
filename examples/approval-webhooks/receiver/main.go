// Command receiver is the approvers' system of examples/approval-webhooks:
// it takes turngate's approval webhooks, rejects any delivery whose
// X-Turngate-Signature does not verify (extension.Verify: the HMAC of
// "<t>.<body>" under the shared secret, a timestamp within five minutes),
// deduplicates on the event id, and lists what it accepted at GET /events.
// A real receiver would page the on-call approver here.
//
//	RECEIVER_SECRET=… receiver -listen 127.0.0.1:8091
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/turngate/turngate/gateway/extension"
)

// event is an approval webhook's body (gateway/API.md, "Approval
// notifications"): approval.requested, approval.decided or
// approval.expired.
type event struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Approval struct {
		ID        string   `json:"id"`
		SessionID string   `json:"sessionId"`
		ToolName  string   `json:"toolName"`
		Approvers []string `json:"approvers"`
		State     string   `json:"state"`
		DecidedBy string   `json:"decidedBy,omitempty"`
		Reason    string   `json:"reason,omitempty"`
	} `json:"approval"`
}

// receiver keeps the accepted events and counts the rejected deliveries.
type receiver struct {
	secret []byte

	mu       sync.Mutex
	events   []event
	seen     map[string]bool
	rejected int
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8091", "address to listen on")
	flag.Parse()
	secret := os.Getenv("RECEIVER_SECRET")
	if secret == "" {
		log.Fatal("set RECEIVER_SECRET to the webhook's secret in turngate.yaml")
	}
	rc := &receiver{secret: []byte(secret), seen: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", rc.receive)
	mux.HandleFunc("GET /events", rc.list)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	log.Printf("approval webhook receiver listening on http://%s", *listen)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// receive takes one delivery: 204 once verified and kept, 401 when the
// signature does not verify, 400 for a body that is not an event.
func (rc *receiver) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	if err := extension.Verify(rc.secret, r.Header.Get(extension.SignatureHeader), body, time.Now(), extension.DefaultTolerance); err != nil {
		rc.mu.Lock()
		rc.rejected++
		rc.mu.Unlock()
		log.Printf("rejected a delivery: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "not an approval event", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.seen[ev.ID] { // a redelivery whose answer was lost
		rc.seen[ev.ID] = true
		rc.events = append(rc.events, ev)
		log.Printf("%s: approval %s of %s (%s)", ev.Type, ev.Approval.ID, ev.Approval.ToolName, ev.Approval.State)
	}
	w.WriteHeader(http.StatusNoContent)
}

// list answers {"events": [...], "rejected": N}.
func (rc *receiver) list(w http.ResponseWriter, _ *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	events := rc.events
	if events == nil {
		events = []event{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"events": events, "rejected": rc.rejected})
}
