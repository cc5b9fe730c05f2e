// Command backend is the tool-journal example's stand-in shop: POST /charge
// charges once per Idempotency-Key (a repeated key answers the first
// charge again, as a payment API does) and POST /ship answers only once
// POST /release was called, so a turn can be caught waiting on it. GET
// /calls reports every request as JSON lines: path, Idempotency-Key and
// tool call id.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"sync"
)

type call struct {
	Path           string `json:"path"`
	IdempotencyKey string `json:"idempotencyKey"`
	ToolCallID     string `json:"toolCallId"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "listen address")
	flag.Parse()
	var (
		mu       sync.Mutex
		calls    []call
		charges  = map[string]int{} // charge number per key
		released = make(chan struct{})
		once     sync.Once
	)
	record := func(r *http.Request) string {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		calls = append(calls, call{r.URL.Path, key, r.Header.Get("X-Turngate-Tool-Call-Id")})
		mu.Unlock()
		return key
	}
	http.HandleFunc("POST /charge", func(w http.ResponseWriter, r *http.Request) {
		key := record(r)
		mu.Lock()
		n, seen := charges[key]
		if !seen {
			n = len(charges) + 1
			charges[key] = n
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"charge": n, "replayed": seen})
	})
	http.HandleFunc("POST /ship", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		select {
		case <-released:
			_ = json.NewEncoder(w).Encode(map[string]string{"shipment": "on its way"})
		case <-r.Context().Done():
		}
	})
	http.HandleFunc("POST /release", func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(released) })
	})
	http.HandleFunc("GET /calls", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		enc := json.NewEncoder(w)
		for _, c := range calls {
			_ = enc.Encode(c)
		}
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}
