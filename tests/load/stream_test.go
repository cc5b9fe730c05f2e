package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadStream(t *testing.T) {
	serverTool, err := os.ReadFile("testdata/server-tool.sse")
	if err != nil {
		t.Fatal(err)
	}
	long := `data: {"type":"tool-output-available","output":"` + strings.Repeat("x", 40<<10) + `"}` + "\n\n"
	for _, tc := range []struct {
		name  string
		input string
		want  streamStats // firstText is only checked for being set
		text  bool
	}{
		{"server tool turn", string(serverTool), streamStats{events: 20, toolOutputs: 1, done: true}, true},
		{"error event", "data: {\"type\":\"start\"}\n\ndata: {\"type\":\"error\",\"errorText\":\"boom\"}\n\ndata: [DONE]\n\n",
			streamStats{events: 2, errorText: "error event: boom", done: true}, false},
		{"tool error", "data: {\"type\":\"tool-output-error\",\"toolCallId\":\"c\",\"errorText\":\"blocked\"}\n\ndata: [DONE]\n\n",
			streamStats{events: 1, toolErrorText: "tool-output-error event: blocked", done: true}, false},
		{"no done", "data: {\"type\":\"text-delta\",\"delta\":\"a\"}\n\n", streamStats{events: 1}, true},
		{"crlf and comments", ": keep-alive\r\n\r\ndata: {\"type\":\"text-delta\"}\r\n\r\ndata: [DONE]\r\n\r\n", streamStats{events: 1, done: true}, true},
		{"type not first", "data: {\"delta\":\"a\",\"type\":\"text-delta\"}\n\ndata: [DONE]\n\n", streamStats{events: 1, done: true}, true},
		{"event over the buffer", long + "data: [DONE]\n\n", streamStats{events: 1, done: true}, false},
		{"empty", "", streamStats{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readStream(strings.NewReader(tc.input), time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if (got.firstText != 0) != tc.text {
				t.Errorf("firstText = %v, want set: %v", got.firstText, tc.text)
			}
			got.firstText = 0
			if got != tc.want {
				t.Errorf("readStream = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	in := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.2345e+07
turngate_turns_total{agent="demo",status="completed",tenant="default"} 7
process_cpu_seconds_total 3.5 1700000000000
`
	got, err := parseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 42, "go_memstats_heap_inuse_bytes": 12345000, "process_cpu_seconds_total": 3.5}
	if len(got) != len(want) {
		t.Errorf("parseMetrics = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines many\n")); err == nil {
		t.Error("a malformed value parsed")
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := summarize(d, 10*time.Millisecond)
	want := latency{N: 100, Mean: 40.5, P50: 40, P95: 85, P99: 89, Max: 90}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if got := summarize(nil, 0); got != (latency{}) {
		t.Errorf("summarize(nil) = %+v", got)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"start turns", []string{"-start"}, true},
		{"url policy", []string{"-mode", "policy", "-url", "http://127.0.0.1:8080/"}, true},
		{"compare", []string{"-mode", "opa-compare"}, true},
		{"neither start nor url", nil, false},
		{"both", []string{"-start", "-url", "http://x"}, false},
		{"compare with url", []string{"-mode", "opa-compare", "-url", "http://x"}, false},
		{"unknown mode", []string{"-mode", "fast", "-start"}, false},
		{"zero sessions", []string{"-start", "-c", "0"}, false},
		{"bad audit", []string{"-start", "-audit", "stdout"}, false},
		{"profile without start", []string{"-url", "http://x", "-cpuprofile", "x"}, false},
		{"extra argument", []string{"-start", "now"}, false},
		{"gateway env", []string{"-start", "-gateway-env", "GOGC=400", "-gateway-env", "GOMEMLIMIT=1GiB"}, true},
		{"gateway env not KEY=VALUE", []string{"-start", "-gateway-env", "GOGC"}, false},
		{"gateway env without start", []string{"-url", "http://x", "-gateway-env", "GOGC=400"}, false},
		{"rate", []string{"-start", "-rate", "1000"}, true},
		{"negative rate", []string{"-start", "-rate", "-5"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseFlags(tc.args, &strings.Builder{})
			if (err == nil) != tc.ok {
				t.Fatalf("parseFlags(%q) error = %v, want ok %v", tc.args, err, tc.ok)
			}
			if tc.ok && p.Agent == "" {
				t.Error("no default agent")
			}
		})
	}
}

// TestPaceNeverAhead checks that pace never lets more turns start than its
// rate allows for the time elapsed, and that starts do come.
func TestPaceNeverAhead(t *testing.T) {
	const rate = 2000.0
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	starts := pace(stop, rate, 4)
	got := 0
	deadline := time.After(5 * time.Second)
	for got < 20 {
		select {
		case <-starts:
			got++
			if allowed := time.Since(begin).Seconds() * rate; float64(got) > allowed {
				t.Fatalf("%d starts after %v: more than %.0f turns/s allow", got, time.Since(begin), rate)
			}
		case <-deadline:
			t.Fatalf("only %d starts in 5 s at %.0f/s", got, rate)
		}
	}
}
