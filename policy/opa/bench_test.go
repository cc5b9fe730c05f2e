package opa

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// benchPolicy is n rules in the shapes operators write: a search limit
// clamp, then blocks by tool and mode, tenant allow-lists from data, and
// per-tool input clamps.
func benchPolicy(b *testing.B, n int) *Policy {
	var src strings.Builder
	src.WriteString(pkg)
	src.WriteString("patch contains {\"op\": \"replace\", \"path\": \"/limit\", \"value\": 50} if {\n\tinput.tool.name == \"search\"\n\tinput.tool.input.limit > 50\n}\n\n")
	for i := 1; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&src, "block contains \"tool_%d is disabled in read-only mode\" if {\n\tinput.tool.name == \"tool_%d\"\n\tinput.body.mode == \"read-only\"\n}\n\n", i, i)
		case 1:
			fmt.Fprintf(&src, "block contains \"tenant may not call tool_%d\" if {\n\tinput.tool.name == \"tool_%d\"\n\tnot input.principal.tenant in data.allowed.tool_%d\n}\n\n", i, i, i)
		case 2:
			fmt.Fprintf(&src, "patch contains {\"op\": \"replace\", \"path\": \"/limit\", \"value\": %d} if {\n\tinput.tool.name == \"tool_%d\"\n\tinput.tool.input.limit > %d\n}\n\n", i, i, i)
		}
	}
	var data strings.Builder
	data.WriteString(`{"allowed": {`)
	for i := range n {
		if i > 0 {
			data.WriteString(",")
		}
		fmt.Fprintf(&data, `"tool_%d": ["acme", "globex"]`, i)
	}
	data.WriteString("}}")
	p, errs := Compile(
		[]policy.File{{Path: "bench.rego", Data: []byte(src.String())}},
		[]policy.File{{Path: "data.json", Data: []byte(data.String())}},
		// A generous deadline: a loaded CI machine must not turn a slow
		// iteration into a timeout failure.
		Options{Timeout: time.Minute},
	)
	if errs != nil {
		b.Fatalf("Compile: %v", errs)
	}
	return p
}

// BenchmarkToolCallDecision measures one beforeToolCall decision: input
// conversion, evaluation and decision mapping. It reports the median
// (p50-ns) besides the mean ns/op.
func BenchmarkToolCallDecision(b *testing.B) {
	for _, n := range []int{1, 20, 100} {
		for _, c := range []struct {
			name  string
			input string
		}{
			{"allow", `{"query":"turngate","limit":10}`},
			{"patch", `{"query":"turngate","limit":1000}`},
		} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				p := benchPolicy(b, n)
				tc := call("search", c.input)
				tc.Body = map[string]any{"mode": "read-write"}
				tc.Tool.Description = "Search the web."
				tc.Tool.InputSchema = []byte(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)
				tc.PreviousCalls = []engine.ToolCallRecord{{ToolCallID: "c0", ToolName: "search", Input: []byte(`{"query":"a"}`), Decision: engine.DecisionAllow, Success: true}}
				ctx := context.Background()
				samples := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					start := time.Now()
					d, _, err := p.ToolCall(ctx, tc)
					samples = append(samples, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					if (c.name == "patch") != (d != nil) {
						b.Fatalf("decision %+v for %s", d, c.name)
					}
				}
				slices.Sort(samples)
				b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
			})
		}
	}
}
