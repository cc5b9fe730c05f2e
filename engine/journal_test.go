package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/turngate/turngate/engine"
)

// mapJournal is a ToolJournal in memory: an entry matches a call of the
// same id, tool and input.
type mapJournal struct {
	mu      sync.Mutex
	entries map[string]journaled
}

type journaled struct {
	call  engine.JournalCall
	entry engine.JournalEntry
}

func (j *mapJournal) Lookup(_ context.Context, c engine.JournalCall) (engine.JournalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[c.ToolCallID]
	if !ok || e.call.ToolName != c.ToolName || string(e.call.Input) != string(c.Input) {
		return engine.JournalEntry{}, false
	}
	return e.entry, true
}

func (j *mapJournal) Record(_ context.Context, c engine.JournalCall, e engine.JournalEntry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.entries == nil {
		j.entries = map[string]journaled{}
	}
	j.entries[c.ToolCallID] = journaled{c, e}
}

func TestToolJournalReplaysCompletedCalls(t *testing.T) {
	const id = "call_0_A" // callStep's id of the first call, to tool A
	tests := []struct {
		name      string
		journal   map[string]journaled // before the run
		wantRuns  int32                // executions of the tool
		wantSeen  string               // the tool result the model's next step sees
		wantError bool
		wantEntry engine.JournalEntry // journaled after the run
	}{
		{
			name:      "a first run executes and journals",
			wantRuns:  1,
			wantSeen:  `{"tool":"A","input":{"q":"x"}}`,
			wantEntry: engine.JournalEntry{Output: json.RawMessage(`{"tool":"A","input":{"q":"x"}}`)},
		},
		{
			name: "a re-run reuses the journaled output",
			journal: map[string]journaled{id: {
				engine.JournalCall{ToolCallID: id, ToolName: "A", Input: json.RawMessage(`{"q":"x"}`)},
				engine.JournalEntry{Output: json.RawMessage(`{"from":"journal"}`)},
			}},
			wantSeen:  `{"from":"journal"}`,
			wantEntry: engine.JournalEntry{Output: json.RawMessage(`{"from":"journal"}`)},
		},
		{
			name: "a re-run reuses the journaled error",
			journal: map[string]journaled{id: {
				engine.JournalCall{ToolCallID: id, ToolName: "A", Input: json.RawMessage(`{"q":"x"}`)},
				engine.JournalEntry{Error: "disk full"},
			}},
			wantSeen:  `"Tool \"A\" failed."`, // the detail stays in afterToolCall
			wantError: true,
			wantEntry: engine.JournalEntry{Error: "disk full"},
		},
		{
			name: "another input under the same id runs again",
			journal: map[string]journaled{id: {
				engine.JournalCall{ToolCallID: id, ToolName: "A", Input: json.RawMessage(`{"q":"y"}`)},
				engine.JournalEntry{Output: json.RawMessage(`{"from":"journal"}`)},
			}},
			wantRuns:  1,
			wantSeen:  `{"tool":"A","input":{"q":"x"}}`,
			wantEntry: engine.JournalEntry{Output: json.RawMessage(`{"tool":"A","input":{"q":"x"}}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			var key string
			a := echoTool("A")
			inner := a.Executor
			a.Executor = engine.ExecutorFunc(func(ctx context.Context, c engine.ToolExecution) (json.RawMessage, error) {
				runs.Add(1)
				key = c.IdempotencyKey
				return inner.Execute(ctx, c)
			})
			fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
			h := newHarness(t, fake, a)
			j := &mapJournal{entries: tt.journal}
			h.req.Journal = j
			res := h.run(context.Background())
			if res.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			if got := runs.Load(); got != tt.wantRuns {
				t.Errorf("the tool ran %d times, want %d", got, tt.wantRuns)
			}
			if tt.wantRuns > 0 && key != engine.IdempotencyKey(h.req.Identity, id) {
				t.Errorf("the tool got idempotency key %q, want IdempotencyKey of the call", key)
			}
			seen := toolResultsSeen(t, fake.requests()[1])[0]
			if string(seen.Output) != tt.wantSeen || seen.IsError != tt.wantError {
				t.Errorf("model saw %s (error %v), want %s (error %v)", seen.Output, seen.IsError, tt.wantSeen, tt.wantError)
			}
			if rc := h.rec.after[0]; !rc.Executed {
				t.Errorf("afterToolCall says the call was not executed: %+v", rc)
			}
			got := j.entries[id].entry
			if string(got.Output) != string(tt.wantEntry.Output) || got.Error != tt.wantEntry.Error {
				t.Errorf("journal holds %+v, want %+v", got, tt.wantEntry)
			}
		})
	}
}

// An aborted turn journals nothing of the call the abort interrupted: its
// outcome is unknown, so a re-run runs it again.
func TestToolJournalSkipsInterruptedCalls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := echoTool("A")
	a.Executor = engine.ExecutorFunc(func(ctx context.Context, _ engine.ToolExecution) (json.RawMessage, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h := newHarness(t, newFake(callStep(`A={"q":"x"}`), textStep("ok")), a)
	j := &mapJournal{}
	h.req.Journal = j
	if res := h.run(ctx); res.Status != engine.StatusAborted {
		t.Fatalf("status %s, want aborted", res.Status)
	}
	if len(j.entries) != 0 {
		t.Errorf("the interrupted call was journaled: %+v", j.entries)
	}
}

func TestIdempotencyKey(t *testing.T) {
	base := engine.Identity{RequestID: "sub_1", SessionID: "s1", Principal: engine.Principal{Tenant: "acme"}}
	key := engine.IdempotencyKey(base, "call_1")
	if len(key) != 64 {
		t.Fatalf("key %q is not a hex SHA-256", key)
	}
	same := base
	same.Agent, same.EntryPath, same.Principal.Subject = "other", engine.EntryChat, "bob"
	if got := engine.IdempotencyKey(same, "call_1"); got != key {
		t.Errorf("the key changed with the agent, entry or subject: %s, want %s", got, key)
	}
	differ := []struct {
		name string
		id   engine.Identity
		call string
	}{
		{"another tenant", engine.Identity{RequestID: "sub_1", SessionID: "s1", Principal: engine.Principal{Tenant: "evil"}}, "call_1"},
		{"another session", engine.Identity{RequestID: "sub_1", SessionID: "s2", Principal: engine.Principal{Tenant: "acme"}}, "call_1"},
		{"another request", engine.Identity{RequestID: "sub_2", SessionID: "s1", Principal: engine.Principal{Tenant: "acme"}}, "call_1"},
		{"another call", base, "call_2"},
		// The parts are length-prefixed: moving bytes between them changes the key.
		{"shifted parts", engine.Identity{RequestID: "sub_1", SessionID: "1", Principal: engine.Principal{Tenant: "acmes"}}, "call_1"},
	}
	for _, d := range differ {
		if engine.IdempotencyKey(d.id, d.call) == key {
			t.Errorf("%s: same key as the base call", d.name)
		}
	}
}
