package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/turngate/turngate/internal/tracing/otlptest"
)

// tracingCollector is the OTLP receiver of the tracing example's scenario:
// otlpCollector starts it, exampleTracing reads it (one after the other,
// in the example's subtest).
var tracingCollector *otlptest.Receiver

// otlpCollector starts an in-process OTLP/HTTP collector for the tracing
// example and points the gateway at it, exporting every 200 ms.
func otlpCollector(t *testing.T) []string {
	tracingCollector = &otlptest.Receiver{}
	srv := httptest.NewServer(tracingCollector)
	t.Cleanup(srv.Close)
	return []string{"OTLP_ENDPOINT=" + srv.URL, "OTEL_BSP_SCHEDULE_DELAY=200"}
}

// exampleTracing: a chat request with a traceparent is exported as the
// turn's span tree in that trace, with the GenAI attributes and the
// policy decisions as events; a blocked call's span says so.
func exampleTracing(t *testing.T, x *exampleRun) {
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"id":"paris-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"What is the weather in Paris?"}]}]}`
	req, err := http.NewRequest(http.MethodPost, x.URL+"/v1/agents/assistant/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(stream), `"tool-output-available"`) {
		t.Fatalf("chat: %d %s", resp.StatusCode, stream)
	}
	s := x.chat("assistant", userChat("atlantis-1", "u1", "What is the weather in Atlantis?", nil))
	if !strings.Contains(s.String(), "Atlantis is not a real city.") {
		t.Errorf("the Atlantis call was not blocked:\n%s", s)
	}

	var spans []otlptest.Span
	poll(t, "both turns' spans at the collector", func() error {
		spans = tracingCollector.Spans()
		turns := 0
		for _, sp := range spans {
			if sp.Name == "invoke_agent assistant" {
				turns++
			}
		}
		if turns < 2 {
			return fmt.Errorf("%d turn spans of %d spans", turns, len(spans))
		}
		return nil
	})
	var turn *otlptest.Span
	byName := map[string]int{}
	for i, sp := range spans {
		if sp.TraceID != traceID {
			continue
		}
		byName[sp.Name]++
		if sp.Name == "invoke_agent assistant" {
			turn = &spans[i]
		}
	}
	if turn == nil || turn.ParentSpanID != parent || turn.Service != "turngate-example" {
		t.Fatalf("no turn span under the request's traceparent: %+v", turn)
	}
	if want := map[string]int{"invoke_agent assistant": 1, "turngate.step": 2, "chat demo": 2, "execute_tool weather": 1}; fmt.Sprint(byName) != fmt.Sprint(want) {
		t.Errorf("spans of the trace %v, want %v", byName, want)
	}
	blocked := false
	for _, sp := range spans {
		if sp.Name != "execute_tool weather" || sp.Attributes["turngate.tool.decision"] != "block" {
			continue
		}
		for _, e := range sp.Events {
			fired, _ := e.Attributes["turngate.policy.rules_fired"].([]any)
			if e.Attributes["turngate.policy.hook"] == "beforeToolCall" && e.Attributes["turngate.policy.outcome"] == "matched" && len(fired) == 1 {
				blocked = true
			}
		}
	}
	if !blocked {
		t.Errorf("no blocked execute_tool span with its matched beforeToolCall decision event")
	}
}
