package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy/ruleset"
)

// TestScriptParts checks the part counts the overhead figure subtracts
// against what the scripted model really streams for each step.
func TestScriptParts(t *testing.T) {
	search := engine.ToolInfo{Name: "search", Kind: engine.ToolKindBuiltin,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)}
	for _, tc := range []struct {
		name   string
		chunks int
		prompt string
		query  string
	}{
		{"hi one chunk", 1, promptHi, "turngate"},
		{"hi forty chunks", 40, promptHi, "turngate"},
		{"hi many chunks", 100, promptHi, "turngate"},
		{"lo", 40, promptLo, "loville"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(tc.chunks)
			parsed, err := scripted.Parse("model.yaml", []byte(s.yaml()))
			if err != nil {
				t.Fatalf("generated script: %v\n%s", err, s.yaml())
			}
			model := scripted.New(parsed)
			user := engine.ModelMessage{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: tc.prompt}}}
			step0 := countParts(t, model, &engine.ModelRequest{Messages: []engine.ModelMessage{user}, Tools: []engine.ToolInfo{search}})
			output := fmt.Sprintf(`{"query":%q,"limit":%d,"results":[]}`, tc.query, clampedLimit)
			step1 := countParts(t, model, &engine.ModelRequest{Tools: []engine.ToolInfo{search}, Messages: []engine.ModelMessage{
				user,
				{Role: engine.RoleAssistant, Content: []engine.ContentPart{{Type: engine.ContentToolCall, ToolCallID: "call_0_0", ToolName: "search", Input: json.RawMessage(toolInput(tc.query))}}},
				{Role: engine.RoleTool, Content: []engine.ContentPart{{Type: engine.ContentToolResult, ToolCallID: "call_0_0", ToolName: "search", Output: json.RawMessage(output)}}},
			}})
			if want := s.parts(tc.prompt); step0.parts != want[0] || step1.parts != want[1] {
				t.Errorf("parts per step = [%d %d], want %v", step0.parts, step1.parts, want)
			}
			wantText := tc.chunks
			if tc.prompt == promptLo {
				wantText = 1
			}
			if step0.text != wantText || step1.text != wantText || step0.calls != 1 || step1.calls != 0 {
				t.Errorf("text deltas [%d %d], tool calls [%d %d]; want %d text deltas per step and one call in step 0",
					step0.text, step1.text, step0.calls, step1.calls, wantText)
			}
		})
	}
}

type partCount struct{ parts, text, calls int }

func countParts(t *testing.T, model *scripted.Provider, req *engine.ModelRequest) partCount {
	t.Helper()
	s, err := model.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var c partCount
	for s.Next() {
		c.parts++
		switch s.Current().Type {
		case engine.StreamTextDelta:
			c.text++
		case engine.StreamToolCall:
			c.calls++
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeneratedRulesLoad checks that every generated rules directory
// compiles as the gateway would load it.
func TestGeneratedRulesLoad(t *testing.T) {
	for _, tc := range []struct{ rego, cel, counters int }{{1, 0, 0}, {1, 1, 0}, {20, 10, 0}, {100, 50, 0}, {20, 10, 3}} {
		t.Run(fmt.Sprintf("rego=%d,cel=%d,counters=%d", tc.rego, tc.cel, tc.counters), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rules")
			if err := writeRules(dir, tc.rego, tc.cel, tc.counters); err != nil {
				t.Fatal(err)
			}
			if _, errs := ruleset.Load(dir, ruleset.Options{}); errs != nil {
				t.Fatalf("loading generated rules: %v", errs)
			}
		})
	}
}

// TestConfigParses checks the generated gateway config against the
// gateway's strict decoder.
func TestConfigParses(t *testing.T) {
	dir := t.TempDir()
	pg := &pgTarget{dsn: "postgres://postgres@127.0.0.1:5432/turngate_load_1?application_name=turngate-load"}
	for _, tt := range []struct {
		audit string
		pg    *pgTarget
	}{{"file", nil}, {"none", nil}, {"file", pg}} {
		p := &params{Mode: modeTurns, Start: true, Chunks: 4, Rego: 2, CEL: 2, Audit: tt.audit, Store: storeSQLite, Replicas: 1}
		if tt.pg != nil {
			p.Store = storePostgres
		}
		if err := writeSetup(dir, p, newScript(p.Chunks), 0, tt.pg); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(filepath.Join(dir, "config.yaml"))
		if err != nil {
			t.Fatalf("audit %s, store %s: %v", tt.audit, p.Store, err)
		}
		if c.Store.Driver != p.Store || (tt.pg != nil && c.Store.DSN != pg.dsn) {
			t.Errorf("store %s: the config's store is %s %q", p.Store, c.Store.Driver, c.Store.DSN)
		}
	}
}
