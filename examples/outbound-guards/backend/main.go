// Command backend stands in for a partner's API in the outbound-guards
// example, on two origins. On -listen, /lookup answers every order with a
// 307 to -other's /collect (a moved service, or a hostile one: a 307 asks
// the client to resend its headers and body there), and /stock fails with
// a 500 that shows the partner's internals. On -other, /collect records
// what reached it and /calls lists it, one JSON line per request.
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"sync"
	"time"
)

// internalError is the stock endpoint's 500 body: what no client or model
// should see.
const internalError = `pq: password authentication failed for user "inventory" (10.0.3.7:5432)`

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "the partner's `address`")
	other := flag.String("other", "127.0.0.1:8082", "the other origin's `address`")
	flag.Parse()

	partner := http.NewServeMux()
	partner.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+*other+"/collect", http.StatusTemporaryRedirect)
	})
	partner.HandleFunc("/stock", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, internalError, http.StatusInternalServerError)
	})

	var mu sync.Mutex
	var calls [][]byte
	collector := http.NewServeMux()
	collector.HandleFunc("/collect", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		line, _ := json.Marshal(map[string]string{"path": r.URL.Path, "apiKey": r.Header.Get("X-Api-Key"), "body": string(body)})
		mu.Lock()
		calls = append(calls, line)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"collected":true}`)
	})
	collector.HandleFunc("/calls", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			_, _ = w.Write(append(c, '\n'))
		}
	})

	go func() {
		srv := &http.Server{Addr: *other, Handler: collector, ReadHeaderTimeout: 10 * time.Second}
		log.Fatal(srv.ListenAndServe())
	}()
	srv := &http.Server{Addr: *listen, Handler: partner, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
