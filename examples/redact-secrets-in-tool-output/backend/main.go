// Command backend stands in for an internal accounts service in the
// redact-secrets-in-tool-output example: it answers every request with the
// JSON document of account.json, secrets included, as careless internal
// APIs do.
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "listen `address`")
	file := flag.String("file", "backend/account.json", "the JSON `file` every request is answered with")
	flag.Parse()
	data, err := os.ReadFile(*file)
	if err != nil {
		log.Fatalf("backend: reading the answer: %v", err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	srv := &http.Server{Addr: *listen, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
