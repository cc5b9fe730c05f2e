// Command collector is a stand-in OpenTelemetry collector for the tracing
// example: it accepts OTLP/HTTP trace exports (protobuf, POST /v1/traces)
// and appends one JSON line per span to a file, so check.sh can grep the
// span tree turngate exported.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/turngate/turngate/internal/tracing/otlptest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "listen `address`")
	out := flag.String("out", "spans.jsonl", "output `file` (one JSON span per line)")
	flag.Parse()
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	enc := json.NewEncoder(f)
	recv := &otlptest.Receiver{OnSpan: func(s otlptest.Span) {
		if err := enc.Encode(s); err != nil {
			log.Print(err)
		}
	}}
	log.Fatal(http.ListenAndServe(*listen, recv))
}
