package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/syncbuf"
	"github.com/turngate/turngate/policy"
)

// A decision line written in key order as it is encoded holds what
// marshalling the record holds, "kind" added, every optional field
// present or absent as encoding/json would have it, its input compacted
// but not reordered, its chain members' places known without a scan, and
// reads back as the record it was.
func TestDecisionLine(t *testing.T) {
	step0, step3 := 0, 3
	for _, tc := range []struct {
		name string
		r    *policy.Record
	}{
		{"empty", &policy.Record{}},
		{"step zero", &policy.Record{Hook: policy.HookBeforeStep, StepNumber: &step0, Outcome: policy.OutcomeNoMatch}},
		{"every field", &policy.Record{Time: time.Date(2026, 12, 2, 7, 0, 0, 123456789, time.FixedZone("x", 3600)),
			Hook: policy.HookBeforeToolCall, Revision: "sha256:ab", RequestID: "req<1>", SessionID: "s\"1\"", Agent: "dé\nmo",
			Tenant: "a&b", StepNumber: &step3, ToolCallID: "c1", ToolName: "search", ToolKind: "mcp", ToolServer: "srv",
			Outcome: policy.OutcomeError, RulesFired: []string{"data.turngate.tool_call.block", "x\u2028y"}, RulesFiredAt: []string{"tools.rego:5, tools.rego:9", "x.rego:1"},
			SetBy:     map[string]string{"model": "b.yaml#m", "maxSteps": "a.yaml#s"},
			Decision:  &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no </script>"},
			Error:     "rules.rego:3:5: eval_conflict_error",
			Conflicts: []policy.Conflict{{Field: "maxSteps", Rules: []string{"a", "b"}, Resolution: "min"}},
			Shadow:    &policy.Shadow{RulesFired: []string{"s"}, Changed: true, Effects: map[string]string{"s": "block"}},
			Input:     json.RawMessage("{\"tool\": {\"name\": \"search\",\n \"input\": {\"q\": \"x\", \"a\": 1}}}"), DurationMicros: 987}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := newLog(nil, nil, nil).encode(newLineBuf(), KindDecision, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(line, []byte("\n")) != 1 || !bytes.HasSuffix(line, []byte("\n")) {
				t.Fatalf("not one line: %q", line)
			}
			if len(tc.r.Input) > 0 && !bytes.Contains(line, []byte(`,"input":{"tool":{"name":"search","input":{"q":"x","a":1}}},`)) {
				t.Errorf("the input is not copied compacted and in its order: %s", line)
			}
			if _, at, _ := appendDecision(nil, tc.r); at != chainOffsets(line) {
				t.Errorf("chain members at %+v, the line scanned says %+v", at, chainOffsets(line))
			}
			if top := topLevelKeys(t, line); !slices.IsSorted(top) {
				t.Errorf("top-level keys %v are not in key order", top)
			}
			raw, err := json.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			var got, want map[string]any
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			want["kind"] = KindDecision
			if !reflect.DeepEqual(got, want) {
				t.Errorf("line\n%s\nrecord\n%s", line, raw)
			}
			back, err := ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			if back.Hook != tc.r.Hook || back.Error != tc.r.Error || back.Agent != tc.r.Agent || !back.Time.Equal(tc.r.Time) ||
				(len(tc.r.Input) > 0) != (len(back.Input) > 0) {
				t.Errorf("read back %+v", back)
			}
		})
	}
}

// A decision's input is copied as the hooks rendered it when it is an
// object on one line, and compacted (which refuses what is not JSON)
// otherwise.
func TestDecisionInputCopied(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"a":{"c":[2]}}`, `"input":{"b":1,"a":{"c":[2]}},`},
		{"{\"b\": 1,\n\"a\": 2}", `"input":{"b":1,"a":2},`},
		{`[1, 2]`, `"input":[1,2],`},
	} {
		line, err := newLog(nil, nil, nil).encode(newLineBuf(), KindDecision, &policy.Record{Input: json.RawMessage(c.in)})
		if err != nil || !bytes.Contains(line, []byte(c.want)) || bytes.Count(line, []byte("\n")) != 1 {
			t.Errorf("input %q: line %s, %v; want it to hold %s", c.in, line, err, c.want)
		}
	}
}

// A decision record whose input is not JSON is not written as a broken
// line: the write fails and says so once.
func TestDecisionLineRefusesInvalidInput(t *testing.T) {
	if _, err := newLog(nil, nil, nil).encode(newLineBuf(), KindDecision, &policy.Record{Input: json.RawMessage(`{"a":`)}); err == nil ||
		!strings.Contains(err.Error(), "input") {
		t.Errorf("err = %v, want an input error", err)
	}
}

// Records handed over by many goroutines at once are all written, each
// once, as one verifying chain, the turn records after every decision
// record their goroutine handed over before them; Close writes the rest.
func TestWriterChainsConcurrentRecords(t *testing.T) {
	var buf syncbuf.Buffer
	l := New(&buf, nil, nil)
	const goroutines, each = 8, 300 // 2,400 records: more than one batch
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.Record(&policy.Record{Hook: policy.HookBeforeToolCall, RequestID: string(rune('a' + g)), DurationMicros: int64(i),
					Outcome: policy.OutcomeNoMatch, Input: json.RawMessage(`{"n":1}`)})
				if i%100 == 99 {
					l.Turn(&Turn{RequestID: "turn"})
					if n := bytes.Count(buf.Bytes(), []byte(`"requestId":"`+string(rune('a'+g))+`"`)); n != i+1 {
						t.Errorf("goroutine %d: %d of its records written when its turn returned, want %d", g, n, i+1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := &Verifier{}
	if err := v.Verify(bytes.NewReader(buf.Bytes()), "written"); err != nil {
		t.Fatalf("the chain does not verify: %v", err)
	}
	if want := 1 + goroutines*each + goroutines*each/100; v.Records != want {
		t.Errorf("%d records, want %d", v.Records, want)
	}
}

// blockingWriter blocks every Write after the first (the chain-start)
// until release is closed.
type blockingWriter struct {
	release chan struct{}
	started bool
	syncbuf.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if w.started { // only the Log's writer writes after the chain-start
		<-w.release
	}
	w.started = true
	return w.Buffer.Write(p)
}

// A sink that does not take writes does not hold up decisions: the
// records wait in the writer's queue (up to maxQueued), and are written,
// in order and chained, once the sink takes them again.
func TestStalledSinkDoesNotHoldDecisions(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	l := New(w, nil, nil)
	start := len(w.Bytes())
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			l.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Outcome: policy.OutcomeNoMatch, DurationMicros: int64(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a timing assertion
		t.Fatal("Record waited for the stalled sink")
	}
	if n := len(w.Bytes()) - start; n != 0 {
		t.Fatalf("%d bytes written while the sink was stalled", n)
	}
	close(w.release)
	l.Flush()
	v := &Verifier{}
	if err := v.Verify(bytes.NewReader(w.Bytes()), "written"); err != nil || v.Records != 101 {
		t.Errorf("%d records, %v; want the chain-start and 100 chained", v.Records, err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(w.Bytes()[start:])), "\n") {
		if !strings.Contains(line, fmt.Sprintf(`"durationUs":%d,`, i)) {
			t.Fatalf("line %d out of order: %s", i, line)
		}
	}
}
