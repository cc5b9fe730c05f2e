package agenttool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/agenttool"
)

// oneModel resolves every model name to the same provider.
type oneModel struct{ p engine.Provider }

func (m oneModel) Resolve(name string) (engine.Provider, string, error) { return m.p, name, nil }

// agentHooks are an agent's own rules: they record each turn's identity
// and block the calls of one tool.
type agentHooks struct {
	engine.NopHooks
	block string

	mu    *sync.Mutex
	turns *[]engine.Identity
}

func (h agentHooks) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.turns = append(*h.turns, tc.Identity)
	return nil, nil
}

func (h agentHooks) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	if tc.ToolName == h.block {
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: h.block + " is not allowed for " + tc.Agent}, nil
	}
	return nil, nil
}

// world is three agents on one engine, wired through an EngineRunner.
type world struct {
	engine *engine.Engine
	runner *agenttool.EngineRunner
	agents map[string]engine.TurnRequest

	mu        sync.Mutex
	turns     []engine.Identity
	wipeCalls int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	path := filepath.Join("testdata", "agents.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script, err := scripted.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{engine: engine.New(engine.Options{Models: oneModel{scripted.New(script)}, Logger: slog.New(slog.DiscardHandler)})}
	w.runner = &agenttool.EngineRunner{Engine: w.engine, Template: func(agent string) (engine.TurnRequest, error) {
		tmpl, ok := w.agents[agent]
		if !ok {
			return engine.TurnRequest{}, fmt.Errorf("unknown agent %q", agent)
		}
		return tmpl, nil
	}}
	wipe := engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
		w.mu.Lock()
		w.wipeCalls++
		w.mu.Unlock()
		return json.RawMessage(`"wiped"`), nil
	})
	build := func(cfgs ...tools.Config) []engine.Tool {
		built, err := tools.Build(cfgs, tools.Deps{Agents: w.runner})
		if err != nil {
			t.Fatal(err)
		}
		return built
	}
	askFact := tools.Config{Name: "ask_fact", Agent: &agenttool.Config{Agent: "fact", MaxDepth: 2}}
	researcherTools := append(build(askFact), engine.Tool{
		ToolInfo: engine.ToolInfo{Name: "wipe", Kind: engine.ToolKindBuiltin, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Executor: wipe,
	})
	hooks := func(block string) engine.Hooks {
		return agentHooks{block: block, mu: &w.mu, turns: &w.turns}
	}
	w.agents = map[string]engine.TurnRequest{
		"main":       {Model: "scripted", Tools: build(tools.Config{Name: "ask_researcher", Agent: &agenttool.Config{Agent: "researcher"}}), Hooks: hooks("")},
		"researcher": {Model: "scripted", Tools: researcherTools, Hooks: hooks("wipe")},
		"fact":       {Model: "scripted", Tools: build(askFact), Hooks: hooks("")},
	}
	return w
}

func (w *world) run(ctx context.Context, prompt string) *engine.TurnResult {
	req := w.agents["main"]
	req.Identity = engine.Identity{RequestID: "req-1", SessionID: "sess-1", Agent: "main", EntryPath: engine.EntryChat,
		Principal: engine.Principal{Tenant: "acme", Subject: "ada"}}
	req.Messages = []engine.UIMessage{{ID: "u1", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: prompt}}}}
	return w.engine.Run(ctx, &req)
}

// TestTwoLevelsOfSubAgents runs main → researcher → fact on a real engine:
// the researcher's own rule blocks its wipe call, and fact's attempt to
// go one level deeper hits the depth limit; every answer flows back up.
func TestTwoLevelsOfSubAgents(t *testing.T) {
	w := newWorld(t)
	res := w.run(context.Background(), "research rome")
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status = %s (%s)", res.Status, res.Error)
	}
	final := res.Steps[len(res.Steps)-1].Text
	for _, want := range []string{
		"The ask_researcher tool returned:",
		"wipe is not allowed for researcher",
		"sub-agent depth limit 2 reached",
	} {
		if !strings.Contains(final, want) {
			t.Errorf("main's answer lacks %q:\n%s", want, final)
		}
	}
	if w.wipeCalls != 0 {
		t.Errorf("the blocked wipe tool ran %d times", w.wipeCalls)
	}

	byAgent := map[string]engine.Identity{}
	for _, id := range w.turns {
		byAgent[id.Agent] = id
	}
	if len(w.turns) != 3 || len(byAgent) != 3 {
		t.Fatalf("turns = %+v, want one per agent", w.turns)
	}
	mainID, researcher, fact := byAgent["main"], byAgent["researcher"], byAgent["fact"]
	for _, c := range []struct {
		id            engine.Identity
		depth         int
		sessionPrefix string
	}{
		{researcher, 1, mainID.SessionID + ":call_"},
		{fact, 2, researcher.SessionID + ":call_"},
	} {
		if c.id.EntryPath != engine.EntrySubAgent || c.id.Depth != c.depth || !strings.HasPrefix(c.id.SessionID, c.sessionPrefix) ||
			c.id.RequestID != "req-1" || c.id.Principal.Subject != "ada" {
			t.Errorf("%s turn identity = %+v, want depth %d, session %s…", c.id.Agent, c.id, c.depth, c.sessionPrefix)
		}
	}
}

// TestSubAgentCancelledWithParent cancels the parent's context: the
// sub-agent turn ends with it and the tool reports the cancellation.
func TestSubAgentCancelledWithParent(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.runner.RunSubAgent(ctx, agenttool.Request{
		Parent: engine.Identity{SessionID: "sess-1"}, ToolCallID: "call-1", Agent: "researcher",
		Input: json.RawMessage(`{"prompt":"dig into rome"}`),
	})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("error = %v, want a cancellation", err)
	}
	if w.wipeCalls != 0 {
		t.Error("a cancelled sub-agent ran a tool")
	}
}

func TestEngineRunnerUnknownAgent(t *testing.T) {
	w := newWorld(t)
	_, err := w.runner.RunSubAgent(context.Background(), agenttool.Request{Agent: "nobody", Input: json.RawMessage(`{"prompt":"x"}`)})
	if err == nil || err.Error() != `loading agent: unknown agent "nobody"` {
		t.Errorf("error = %v", err)
	}
}

// systemHook records the system prompt of each turn it sees.
type systemHook struct {
	engine.NopHooks
	mu      sync.Mutex
	systems []string
}

func (h *systemHook) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.systems = append(h.systems, tc.System)
	return nil, nil
}

// Prepare completes the sub-agent's turn after its identity and prompt are
// set: what it sets is what the sub-agent's turn runs with, and its error
// is the call's.
func TestEngineRunnerPrepare(t *testing.T) {
	w := newWorld(t)
	seen := &systemHook{}
	fact := w.agents["fact"]
	fact.Hooks = seen
	fact.Tools = nil
	w.agents["fact"] = fact
	req := agenttool.Request{Parent: engine.Identity{SessionID: "sess-1"}, ToolCallID: "call-1", Agent: "fact", Input: json.RawMessage(`{"prompt":"fact about rome"}`)}

	w.runner.Prepare = func(_ context.Context, turn *engine.TurnRequest) error {
		last := turn.Messages[len(turn.Messages)-1].Parts[0].Text
		turn.System = "Prepared for " + turn.Identity.SessionID + " at depth " + fmt.Sprint(turn.Identity.Depth) + ": " + last
		return nil
	}
	out, err := w.runner.RunSubAgent(context.Background(), req)
	if err != nil || !strings.Contains(string(out), "rome is old") {
		t.Fatalf("output %s, %v", out, err)
	}
	if want := []string{"Prepared for sess-1:call-1 at depth 1: fact about rome"}; !slices.Equal(seen.systems, want) {
		t.Errorf("the sub-agent ran with systems %q, want %q", seen.systems, want)
	}

	w.runner.Prepare = func(context.Context, *engine.TurnRequest) error { return errors.New("block unavailable") }
	if _, err := w.runner.RunSubAgent(context.Background(), req); err == nil || err.Error() != "preparing the turn: block unavailable" {
		t.Errorf("error = %v", err)
	}
	if len(seen.systems) != 1 {
		t.Errorf("a turn whose preparation failed ran: %q", seen.systems)
	}
}
