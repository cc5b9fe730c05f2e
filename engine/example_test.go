package engine_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

// ExampleEngine_Run runs one turn of the embedded scripted model: it calls
// the weather tool, a beforeToolCall hook rewrites the city, and the model
// answers from the tool's result.
func ExampleEngine_Run() {
	eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default()}, Logger: quiet})
	weather := engine.Tool{
		ToolInfo: engine.ToolInfo{Name: "weather", Kind: engine.ToolKindBuiltin,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		Executor: engine.ExecutorFunc(func(_ context.Context, c engine.ToolExecution) (json.RawMessage, error) {
			fmt.Printf("weather runs with %s\n", c.Input)
			return json.RawMessage(`"sunny"`), nil
		}),
	}
	hooks := hookFuncs{log: new([]string), tool: func(tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"city":"Lyon"}`)}, nil
	}}
	res := eng.Run(context.Background(), &engine.TurnRequest{
		Model:    "scripted",
		Messages: []engine.UIMessage{userMsg("What is the weather in Paris?")},
		Tools:    []engine.Tool{weather},
		Hooks:    hooks,
		Emit: func(ev engine.Event) {
			if ev.Type == engine.EventFinish {
				b, _ := ev.MarshalJSON()
				fmt.Println(string(b))
			}
		},
	})
	fmt.Println(res.Status, len(res.Steps), "steps; the model saw", string(res.Steps[0].ToolResults[0].Output))
	// Output:
	// weather runs with {"city":"Lyon"}
	// {"type":"finish","finishReason":"stop"}
	// completed 2 steps; the model saw "sunny"
}
