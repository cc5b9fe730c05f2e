package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/benchrules"
	"github.com/turngate/turngate/policy"
)

// benchDir holds the decision-path benchmark's policy, data and tool call.
const benchDir = "testdata/bench"

// sharedDir holds the benchmark's policy rewritten to walk the tool input
// once; it uses benchDir's data.
const sharedDir = "testdata/bench-shared"

// benchPolicies are the benchmark's policies: testdata/bench and its
// rewrite in testdata/bench-shared, with the same data.
func benchPolicies(t testing.TB) map[string]ruleFiles {
	bench := loadDir(t, benchDir)
	shared := loadDir(t, sharedDir)
	shared.data = bench.data
	return map[string]ruleFiles{"bench": bench, "shared": shared}
}

// benchCall is the benchmark's tool call: a CRM update by tenant-03 with an
// input of 31 fields nested 3 deep (testdata/bench/input.json), after 8
// earlier calls in the turn. extra adds top-level contact fields to the
// input.
func benchCall(t testing.TB, extra string) *engine.ToolCallContext {
	t.Helper()
	input, err := os.ReadFile(benchDir + "/input.json")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(benchDir + "/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if extra != "" {
		input = []byte(strings.Replace(string(input), `"contact": {`, `"contact": {`+extra+`, `, 1))
	}
	tc := call("crm_update", string(input))
	tc.Principal = engine.Principal{Tenant: "tenant-03", Subject: "agent-7", Roles: []string{"agent", "sales"}}
	tc.Tool.Description = "Update an account, its contact and its open opportunity in the CRM."
	tc.Tool.InputSchema = schema
	tc.StepNumber = 4
	tc.Body = map[string]any{"mode": "read-write", "channel": "web"}
	for i, pc := range []struct{ tool, input, decision string }{
		{"crm_lookup", `{"account": "Northwind Traders"}`, engine.DecisionAllow},
		{"kb_search", `{"query": "SSO add-on pricing", "limit": 5}`, engine.DecisionAllow},
		{"search", `{"query": "northwind traders dublin", "limit": 10}`, engine.DecisionAllow},
		{"crm_update", `{"account": {"id": "acc-10293", "tier": "gold"}}`, engine.DecisionAllow},
		{"send_email", `{"to": "dana@example.com", "subject": "quote"}`, engine.DecisionBlock},
		{"summarize", `{"text": "Call notes: revised quote, SSO add-on, DPA review."}`, engine.DecisionAllow},
		{"calendar_write", `{"title": "DPA review", "start": "2027-01-12T10:00:00Z"}`, engine.DecisionAllow},
		{"crm_update", `{"opportunity": {"stage": "negotiation"}}`, engine.DecisionAllow},
	} {
		tc.PreviousCalls = append(tc.PreviousCalls, engine.ToolCallRecord{
			ToolCallID: "call-" + string(rune('a'+i)), ToolName: pc.tool, Input: json.RawMessage(pc.input),
			Decision: pc.decision, Success: pc.decision == engine.DecisionAllow, StepNumber: i / 2,
		})
	}
	return tc
}

type benchCase struct {
	name, extra string
	patched     bool
}

// benchCases are the benchmark's calls: one no rule fires for (every rule
// is evaluated in full and the call is allowed unchanged) and one with an
// e-mail address the tenant's patch rule masks.
var benchCases = []benchCase{
	{name: "allow"},
	{name: "patch", extra: `"email": "liam.oconnor@northwind.example"`, patched: true},
}

// naiveEmbedding is OPA embedded the way its documentation introduces it:
// rego.New with the modules and the data in an in-memory store, prepared
// once; per call an input of Go values decoded from the call's JSON, Eval
// with rego.EvalInput and default options, and the result read as Go
// values.
type naiveEmbedding struct {
	pq rego.PreparedEvalQuery
}

func newNaiveEmbedding(t testing.TB, rf ruleFiles) *naiveEmbedding {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal(rf.data[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	opts := []func(*rego.Rego){rego.Query("data." + ToolCallPackage), rego.Store(inmem.NewFromObject(data))}
	for _, m := range rf.modules {
		opts = append(opts, rego.Module(m.Path, string(m.Data)))
	}
	pq, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &naiveEmbedding{pq: pq}
}

// decide evaluates tc's input (the document ToolCallInput describes) and
// returns the decision document.
func (n *naiveEmbedding) decide(ctx context.Context, tc *engine.ToolCallContext) (map[string]any, error) {
	var toolInput, schema any
	if err := json.Unmarshal(tc.Input, &toolInput); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(tc.Tool.InputSchema, &schema); err != nil {
		return nil, err
	}
	prev := make([]any, len(tc.PreviousCalls))
	for i, pc := range tc.PreviousCalls {
		var in any
		if err := json.Unmarshal(pc.Input, &in); err != nil {
			return nil, err
		}
		prev[i] = map[string]any{
			"toolName": pc.ToolName, "toolCallId": pc.ToolCallID, "input": in,
			"decision": pc.Decision, "success": pc.Success, "stepNumber": pc.StepNumber,
		}
	}
	input := map[string]any{
		"agent": tc.Agent, "sessionId": tc.SessionID, "requestId": tc.RequestID, "entryPath": tc.EntryPath, "depth": tc.Depth,
		"principal": map[string]any{"tenant": tc.Principal.Tenant, "subject": tc.Principal.Subject, "roles": tc.Principal.Roles},
		"tool": map[string]any{
			"name": tc.ToolName, "kind": tc.Tool.Kind, "server": tc.Tool.Server, "description": tc.Tool.Description,
			"dynamic": tc.Dynamic, "input": toolInput, "schema": schema,
		},
		"toolCallId": tc.ToolCallID, "stepNumber": tc.StepNumber, "messagesCount": len(tc.Messages),
		"body": tc.Body, "previousCalls": prev,
	}
	rs, err := n.pq.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return nil, err
	}
	doc, _ := rs[0].Expressions[0].Value.(map[string]any)
	return doc, nil
}

// TestBenchPolicy checks that the benchmark measures what it says: the
// turngate decision path and the naive embedding agree on each case, and
// both benchmark policies' rules fire on the inputs they are written for.
func TestBenchPolicy(t *testing.T) {
	for name, rf := range benchPolicies(t) {
		p, errs := Compile(rf.modules, rf.data, testOptions)
		if errs != nil {
			t.Fatal(errs)
		}
		testBenchPolicy(t, name, p, newNaiveEmbedding(t, rf))
	}
}

func testBenchPolicy(t *testing.T, name string, p *Policy, naive *naiveEmbedding) {
	for _, c := range []struct {
		name, extra string
		tenant      string
		want        string // an engine action; "" for allow unchanged
		reason      string
	}{
		{name: "allow"},
		{name: "patch", extra: benchCases[1].extra, want: engine.ActionAllow},
		{name: "AWS key", extra: `"note": "key AKIAIOSFODNN7EXAMPLE"`, want: engine.ActionBlock, reason: "/contact/note holds an AWS access key id"},
		{name: "SSN", extra: `"ssn": "078-05-1120"`, want: engine.ActionBlock, reason: "/contact/ssn holds a social security number and tenant tenant-03 may not send PII"},
		{name: "host", extra: `"site": "https://evil.example/x"`, want: engine.ActionBlock, reason: "/contact/site calls host evil.example, which tenant tenant-03 does not allow"},
		{name: "unknown tenant", tenant: "nobody", want: engine.ActionBlock, reason: "tenant nobody is unknown"},
	} {
		t.Run(name+"/"+c.name, func(t *testing.T) {
			tc := benchCall(t, c.extra)
			if c.tenant != "" {
				tc.Principal.Tenant = c.tenant
			}
			d, _, err := p.ToolCall(context.Background(), tc)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := naive.decide(context.Background(), tc)
			if err != nil {
				t.Fatal(err)
			}
			blocks, _ := doc["block"].([]any)
			patches, _ := doc["patch"].([]any)
			switch {
			case c.want == "":
				if d != nil || len(blocks)+len(patches) > 0 {
					t.Fatalf("turngate %+v, naive %v; want allow unchanged", d, doc)
				}
			case c.want == engine.ActionBlock:
				if d == nil || d.Action != engine.ActionBlock || d.Reason != c.reason || len(blocks) != 1 || blocks[0] != c.reason {
					t.Fatalf("turngate %+v, naive %v; want block %q", d, blocks, c.reason)
				}
			default:
				if d == nil || !strings.Contains(string(d.Input), `"email":"[email]"`) || len(patches) != 1 {
					t.Fatalf("turngate %+v, naive %v; want the e-mail masked", d, patches)
				}
			}
		})
	}
}

// BenchmarkDecisionPath measures a beforeToolCall decision the way the
// gateway makes it (Policy.ToolCall: input, evaluation, decision, patch)
// against the naive embedding of the same modules and data, interleaved:
// each iteration makes one call of each, alternating which goes first, so
// the machine's noise falls on both. It reports each one's median and 99th
// percentile (turngate-p50-ns, naive-p99-ns, …) and their ratios; ns/op is
// the two calls together.
func BenchmarkDecisionPath(b *testing.B) {
	loadRules, loadData := benchrules.Rego(20)
	policies := benchPolicies(b)
	for _, pol := range []struct {
		name  string
		files ruleFiles
		cases []benchCase
	}{
		// The policy of testdata/bench: evaluation is most of the work.
		{"bench", policies["bench"], benchCases},
		// The same decisions with the input's strings walked once.
		{"shared", policies["shared"], benchCases},
		// The load program's 20 rules (none matches this call): little
		// evaluation, so the input and result handling around it shows.
		{"load", ruleFiles{
			modules: []policy.File{{Path: "load.rego", Data: []byte(loadRules)}},
			data:    []policy.File{{Path: "data.json", Data: []byte(loadData)}},
		}, benchCases[:1]},
	} {
		// A generous deadline: a loaded machine must not turn a slow
		// iteration into a timeout failure.
		p, errs := Compile(pol.files.modules, pol.files.data, Options{Timeout: time.Minute})
		if errs != nil {
			b.Fatal(errs)
		}
		naive := newNaiveEmbedding(b, pol.files)
		for _, c := range pol.cases {
			b.Run(pol.name+"/"+c.name, func(b *testing.B) {
				benchInterleaved(b, p, naive, benchCall(b, c.extra), c.patched)
			})
		}
	}
}

// benchInterleaved runs the decision-path benchmark of one call:
// Policy.ToolCall ("turngate") against the naive embedding.
func benchInterleaved(b *testing.B, p *Policy, naive *naiveEmbedding, tc *engine.ToolCallContext, patched bool) {
	ctx := context.Background()
	benchSides(b,
		Side{"turngate", func() error {
			d, _, err := p.ToolCall(ctx, tc)
			if err == nil && (d != nil) != patched {
				err = fmt.Errorf("decision %+v", d)
			}
			return err
		}},
		Side{"naive", func() error {
			_, err := naive.decide(ctx, tc)
			return err
		}})
}

// Side is one of the calls an interleaved benchmark compares.
type Side struct {
	Name string
	Call func() error
}

// benchSides makes, per iteration, one call of each side, rotating which
// goes first, so the machine's noise falls on all of them. It reports each
// side's median and 99th percentile (NAME-p50-ns, NAME-p99-ns) and their
// ratios to the last side's, the reference: p50-ratio and p99-ratio for
// two sides, NAME-p50-ratio and NAME-p99-ratio for more. ns/op is the
// calls together.
func benchSides(b *testing.B, sides ...Side) {
	samples := make([][]time.Duration, len(sides))
	for i := range samples {
		samples[i] = make([]time.Duration, 0, 1024)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range sides {
			k := (i + j) % len(sides)
			start := time.Now()
			err := sides[k].Call()
			samples[k] = append(samples[k], time.Since(start))
			if err != nil {
				b.Fatalf("%s: %v", sides[k].Name, err)
			}
		}
	}
	ref50, ref99 := percentiles(samples[len(sides)-1])
	for k, s := range sides {
		p50, p99 := percentiles(samples[k])
		b.ReportMetric(float64(p50.Nanoseconds()), s.Name+"-p50-ns")
		b.ReportMetric(float64(p99.Nanoseconds()), s.Name+"-p99-ns")
		if k == len(sides)-1 {
			continue
		}
		prefix := ""
		if len(sides) > 2 {
			prefix = s.Name + "-"
		}
		b.ReportMetric(float64(p50)/float64(ref50), prefix+"p50-ratio")
		b.ReportMetric(float64(p99)/float64(ref99), prefix+"p99-ratio")
	}
}

// percentiles returns the median and the 99th percentile of samples.
func percentiles(samples []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(samples)
	return samples[len(samples)/2], samples[len(samples)*99/100]
}
