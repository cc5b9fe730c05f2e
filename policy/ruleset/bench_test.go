package ruleset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/benchrules"
	"github.com/turngate/turngate/internal/dataurl"
	"github.com/turngate/turngate/policy"
)

// BenchmarkLoad measures building a revision of the shipped rules
// directory: read, hash, compile CEL and Rego.
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, errs := Load("../../rules", Options{}); errs != nil {
			b.Fatal(errs)
		}
	}
}

// BenchmarkHooks measures one hook evaluation through the adapter, record
// included, on the shipped rules.
func BenchmarkHooks(b *testing.B) {
	rev := mustLoad(b, "../../rules", Options{})
	h := rev.Hooks(nil, FailClosed)
	ctx := context.Background()
	b.Run("beforeTurn", func(b *testing.B) {
		tc := &engine.TurnContext{Identity: identity, MaxSteps: 50, Continuation: true}
		for b.Loop() {
			if _, err := h.BeforeTurn(ctx, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("beforeToolCall", func(b *testing.B) {
		tc := toolCall("search", `{"query": "go", "limit": 500}`, map[string]any{"mode": "read-only"})
		for b.Loop() {
			if _, err := h.BeforeToolCall(ctx, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("toolResult", func(b *testing.B) {
		rc := toolResult("search", `{"hits": [{"title": "a"}, {"title": "b"}], "token": "t"}`)
		for b.Loop() {
			if _, err := h.ToolResult(ctx, rc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReloadLatency measures file write → new revision serving through
// Watch (fsnotify, debounce, rebuild, swap), for two debounce windows.
func BenchmarkReloadLatency(b *testing.B) {
	for _, debounce := range []time.Duration{10 * time.Millisecond, DefaultDebounce} {
		b.Run("debounce="+debounce.String(), func(b *testing.B) {
			benchWatchedEdits(b, rulesDir(b, defaultSet()), "10-turn.yaml", debounce)
		})
	}
}

// BenchmarkReloadWithTests measures reloading the shipped rules and each
// example's rules, whose tests gate every reload: "watch" is file write →
// new revision serving through Watch with the default debounce, "reload"
// is Reload alone (read, hash, compile, run the tests, swap).
func BenchmarkReloadWithTests(b *testing.B) {
	examples, err := filepath.Glob("../../examples/*/rules")
	if err != nil {
		b.Fatal(err)
	}
	for _, src := range append([]string{"../../rules"}, examples...) {
		files := ruleFiles(b, src)
		edited := editable(b, files)
		name := filepath.Base(filepath.Dir(src))
		if src == "../../rules" {
			name = "rules"
		}
		b.Run(name+"/watch", func(b *testing.B) {
			benchWatchedEdits(b, rulesDir(b, files), edited, DefaultDebounce)
		})
		b.Run(name+"/reload", func(b *testing.B) {
			dir := rulesDir(b, files)
			m, err := NewManager(dir, Options{PollInterval: -1}, quiet)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				writeFiles(b, dir, map[string]string{edited: files[edited] + "\n# edit " + strconv.Itoa(i) + "\n"})
				if changed, err := m.Reload(); !changed || err != nil {
					b.Fatalf("reload = %v, %v", changed, err)
				}
			}
		})
	}
}

// ruleFiles reads the files of the rules directory dir that a revision
// loads, by name.
func ruleFiles(b *testing.B, dir string) map[string]string {
	b.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if Classify(e.Name()) == KindIgnored {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		files[e.Name()] = string(data)
	}
	return files
}

// editable names the first rule file (Rego or CEL, not a test) of files:
// the one the reload benchmarks edit.
func editable(b *testing.B, files map[string]string) string {
	b.Helper()
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if k := Classify(n); k == KindRego || k == KindCEL {
			return n
		}
	}
	b.Fatalf("no rule file among %v", names)
	return ""
}

// benchWatchedEdits watches dir and, per iteration, renames an edit of
// file (a comment appended; Rego and CEL both take # comments) into place
// and waits until the new revision serves.
func benchWatchedEdits(b *testing.B, dir, file string, debounce time.Duration) {
	b.Helper()
	base, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		b.Fatal(err)
	}
	swapped := make(chan struct{}, 1)
	m, err := NewManager(dir, Options{PollInterval: -1, Debounce: debounce, OnReload: func(result string, err error) {
		if result == ReloadFailure {
			b.Error(err)
		}
		if result == ReloadSuccess {
			swapped <- struct{}{}
		}
	}}, quiet)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = m.Watch(ctx) }()
	for i := 0; b.Loop(); i++ {
		data := string(base) + "\n# edit " + strconv.Itoa(i) + "\n"
		// Rename over, so the watcher never sees a half-written file.
		tmp := filepath.Join(dir, ".edit.tmp")
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			b.Fatal(err)
		}
		select {
		case <-swapped:
		case <-time.After(waitTimeout):
			b.Fatal("timed out waiting for the reload")
		}
	}
}

// loadRules is a rules directory shaped like the load program's (tests/load,
// its defaults): 20 Rego beforeToolCall rules, 10 CEL rules split between
// beforeTurn and beforeStep, none of which matches, plus a tool_result
// redaction that does not match either, so every hook fully evaluates and
// changes nothing.
func loadRules() map[string]string {
	pol, data := benchrules.Rego(20)
	return map[string]string{
		"tools.rego":   pol,
		"results.rego": "package turngate.tool_result\n\nimport rego.v1\n\nredact contains \"/token\" if input.tool.name == \"search\"\n",
		"data.json":    data,
		"turn.yaml":    benchrules.CEL(10),
	}
}

// BenchmarkTurn measures the policy hooks of one load-program turn as the
// gateway calls them: beforeTurn, two beforeSteps, one beforeToolCall and
// one toolResult, each sending its decision record to a recorder that
// keeps it, without and with the evaluated input in the record
// (audit.recordInput). It reports the median turn (p50-ns) besides the
// mean ns/op.
func BenchmarkTurn(b *testing.B) {
	rev := mustLoad(b, rulesDir(b, loadRules()), Options{})
	for _, record := range []bool{false, true} {
		b.Run(fmt.Sprintf("recordInput=%t", record), func(b *testing.B) {
			var kept keeper
			kept.input = record
			benchTurn(b, rev.Hooks(&kept, FailClosed), &kept.last)
		})
	}
}

// keeper keeps the last record; input says whether records carry their
// input (policy.InputRecorder).
type keeper struct {
	last  atomic.Pointer[policy.Record]
	input bool
}

func (k *keeper) Record(r *policy.Record) { k.last.Store(r) }

func (k *keeper) RecordsInput() bool { return k.input }

// benchTurn measures the hooks of one load-program turn through h; kept
// holds the last record.
func benchTurn(b *testing.B, h engine.Hooks, kept *atomic.Pointer[policy.Record]) {
	// A cancellable context, like the request context a gateway turn runs on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := engine.Identity{RequestID: "req-1", SessionID: "sess-1", Agent: "bench", EntryPath: engine.EntryChat,
		Principal: engine.Principal{Tenant: "acme", Subject: "ann", Roles: []string{"dev"}}}
	tools := []engine.ToolInfo{{Name: "weather", Kind: engine.ToolKindHTTP, Description: "Weather by city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
	msgs := []engine.ModelMessage{{Role: "user", Content: []engine.ContentPart{{Type: engine.ContentText, Text: "[hi] weather?"}}}}
	tc := &engine.TurnContext{Identity: id, System: "You are helpful.", Messages: msgs, Tools: tools, Model: "scripted", MaxSteps: 8}
	steps := []*engine.PrepareStepContext{
		{Identity: id, StepNumber: 0, Model: "scripted", System: tc.System, Messages: msgs, Turn: tc},
		{Identity: id, StepNumber: 1, Model: "scripted", System: tc.System, Messages: msgs, Turn: tc,
			Steps: []engine.StepResult{{ToolCalls: []engine.ToolCall{{ToolName: "weather", ToolCallID: "c1"}}}}},
	}
	call := &engine.ToolCallContext{Identity: id, Type: "tool-call", ToolCallID: "c1", ToolName: "weather",
		Input: json.RawMessage(`{"city":"Hiville"}`), Tool: tools[0], StepNumber: 0, Messages: msgs}
	result := &engine.ToolCallResultContext{Identity: id, Type: "tool-call", ToolCallID: "c1", ToolName: "weather",
		Input: call.Input, Tool: tools[0], Success: true, Output: json.RawMessage(`{"city":"Hiville","tempC":21}`),
		Decision: engine.DecisionAllow, Executed: true, DurationMs: 1.5, Messages: msgs}
	turn := func() error {
		if _, err := h.BeforeTurn(ctx, tc); err != nil {
			return err
		}
		for _, sc := range steps {
			if _, err := h.BeforeStep(ctx, sc); err != nil {
				return err
			}
		}
		if d, err := h.BeforeToolCall(ctx, call); err != nil || d != nil {
			return fmt.Errorf("beforeToolCall: %+v, %v", d, err)
		}
		if d, err := h.ToolResult(ctx, result); err != nil || d != nil {
			return fmt.Errorf("toolResult: %+v, %v", d, err)
		}
		return nil
	}
	samples := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		err := turn()
		samples = append(samples, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	if r := kept.Load(); r == nil || r.Outcome != policy.OutcomeNoMatch {
		b.Fatalf("last record %+v", r)
	}
}

// BenchmarkFileTurn measures the CEL hooks' decision records of one turn
// whose user message attaches a 2 MiB image as a data: URL: beforeTurn and
// four beforeSteps, each record carrying its input with the file part's
// stand-in (compactFiles). The file is in turn.messages of every record
// and in step.messages of every beforeStep record.
func BenchmarkFileTurn(b *testing.B) {
	rev := mustLoad(b, rulesDir(b, loadRules()), Options{})
	img := make([]byte, 2<<20)
	for i := range img {
		img[i] = byte(i * 7)
	}
	msgs := []engine.ModelMessage{{Role: "user", Content: []engine.ContentPart{
		{Type: engine.ContentText, Text: "what is in this picture?"},
		{Type: engine.ContentFile, MediaType: "image/png", URL: dataurl.Encode("image/png", img)}}}}
	tc := &engine.TurnContext{Identity: identity, Messages: msgs, Model: "scripted", MaxSteps: 8}
	ctx := context.Background()
	var kept keeper
	kept.input = true
	b.ReportAllocs()
	for b.Loop() {
		h := rev.Hooks(&kept, FailClosed) // the hooks of one turn
		if _, err := h.BeforeTurn(ctx, tc); err != nil {
			b.Fatal(err)
		}
		for step := range 4 {
			sc := &engine.PrepareStepContext{Identity: identity, StepNumber: step, Model: "scripted", Messages: msgs, Turn: tc}
			if _, err := h.BeforeStep(ctx, sc); err != nil {
				b.Fatal(err)
			}
		}
	}
	if r := kept.last.Load(); r == nil || bytes.Contains(r.Input, []byte(";base64,")) || !bytes.Contains(r.Input, []byte(";sha256=")) {
		b.Fatal("the last record does not hold the file's stand-in")
	}
}
