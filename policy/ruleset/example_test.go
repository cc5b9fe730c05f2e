package ruleset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy/ruleset"
)

// A rules directory loads into one revision; Eval dry-runs a hook on it the
// way a turn would.
func ExampleRevision_Eval() {
	rev, errs := ruleset.Load("../../rules", ruleset.Options{})
	if errs != nil {
		fmt.Println(errs)
		return
	}
	res, err := rev.Eval(context.Background(), "beforeToolCall", []byte(`
toolName: delete
tool: {name: delete, kind: http}
input: {path: /tmp/x}
body: {mode: read-only}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	decision, _ := json.Marshal(res.Result)
	fmt.Println(res.Outcome)
	fmt.Println(string(decision))
	// Output:
	// matched
	// {"action":"block","reason":"delete is disabled in read-only mode"}
}

// A Manager serves the live revision; a turn takes Current once and builds
// its hooks from it.
func ExampleManager() {
	m, err := ruleset.NewManager("../../rules", ruleset.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	rev := m.Current() // once per turn
	req := engine.TurnRequest{Hooks: rev.Hooks(nil, ruleset.FailClosed)}
	_ = req // … the rest of the turn request, then Engine.Run
	for _, f := range rev.Files() {
		fmt.Println(f.Name, f.Kind)
	}
	// Output:
	// limits.data.yaml data
	// results.rego rego
	// results_test.rego rego-test
	// tools.rego rego
	// tools_test.rego rego-test
	// turn.yaml cel
	// turn_test.yaml cel-test
}
