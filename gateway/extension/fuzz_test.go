package extension

import (
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy/celrules"
)

// FuzzParseResponse feeds arbitrary answers through everything an
// extension's answer goes through: ParseResponse, the settable-field
// filter and celrules.ApplyExternal on top of a rules' result. Nothing
// may panic, and a restriction the rules set may never loosen.
func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"skipped":true}`, `{"error":"boom"}`, `{"id":7,"result":{}}`,
		`{"result":{"system":"s","maxSteps":50,"activeTools":["a","c"],"toolChoice":"required"}}`,
		`{"result":{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}}`,
		`{"result":{"timeout":{"totalMs":1e12,"chunkMs":-1},"headers":{"a":"b"},"providerOptions":{"x":{"y":1}}}}`,
		`{"result":{"toolChoice":{"type":"tool","toolName":"a"},"seed":1e300,"topK":2.5,"model":"m"}}`,
		`{"result":{"stopSequences":["x",1],"temperature":"hot","sendReasoning":null}}`,
		`{"result":[1]}`, `[`, `{"result":{"maxSteps":0}} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseResponse(data)
		if err != nil || r.Result == nil {
			return
		}
		fields, _ := overrides(r.Result)
		steps, tools, none := 3, []string{"a", "b"}, engine.ToolChoice{Type: engine.ToolChoiceNone}
		cfg := &engine.TurnConfig{MaxSteps: &steps, ActiveTools: &tools, ToolChoice: &none}
		_ = celrules.ApplyExternal(cfg, fields)
		if *cfg.MaxSteps > 3 || *cfg.MaxSteps < 1 {
			t.Errorf("maxSteps %d after %s: the rules' cap of 3 loosened", *cfg.MaxSteps, data)
		}
		for _, name := range *cfg.ActiveTools {
			if name != "a" && name != "b" {
				t.Errorf("activeTools %v after %s: a tool the rules removed", *cfg.ActiveTools, data)
			}
		}
		if cfg.ToolChoice.Type != engine.ToolChoiceNone {
			t.Errorf("toolChoice %v after %s: the rules' none undone", cfg.ToolChoice, data)
		}
	})
}
