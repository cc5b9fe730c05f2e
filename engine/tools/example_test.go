package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/agenttool"
)

// ExampleBuild builds a sub-agent tool and a client tool from config and
// runs the sub-agent tool once.
func ExampleBuild() {
	runner := agenttool.RunnerFunc(func(_ context.Context, req agenttool.Request) (json.RawMessage, error) {
		return json.Marshal(req.Agent + " answers: " + agenttool.Prompt(req.Input))
	})
	built, err := tools.Build([]tools.Config{
		{Name: "ask_researcher", Agent: &agenttool.Config{Agent: "researcher"}},
		{Name: "confirm", Description: "Asks the user to confirm.", Client: &tools.ClientConfig{}},
	}, tools.Deps{Agents: runner})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range built {
		fmt.Printf("%s (%s) %s\n", t.Name, t.Kind, t.InputSchema)
	}
	out, err := built[0].Executor.Execute(context.Background(), engine.ToolExecution{Input: json.RawMessage(`{"prompt":"why is the sky blue?"}`)})
	fmt.Println(string(out), err)
	// Output:
	// ask_researcher (agent) {"type":"object","properties":{"prompt":{"type":"string","description":"The task for the sub-agent, with everything it needs to know."}},"required":["prompt"]}
	// confirm (client) {"type":"object"}
	// "researcher answers: why is the sky blue?" <nil>
}
