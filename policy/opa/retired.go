package opa

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/policy"
)

// retiredInputNames maps the input fields' snake_case names, used before
// turngate adopted the reference's camelCase vocabulary, to their names now.
// A rule that still reads one would see it undefined, and an undefined
// condition in a block rule silently allows, so reading one is a load error
// that names the replacement.
var retiredInputNames = map[string]string{
	"call_id":         "toolCallId",
	"step_number":     "stepNumber",
	"session_id":      "sessionId",
	"request_id":      "requestId",
	"entry_path":      "entryPath",
	"previous_calls":  "previousCalls",
	"messages_count":  "messagesCount",
	"effective_input": "effectiveInput",
	"duration_ms":     "durationMs",
}

// checkRetired reports every reference input.…retired… in m, at the
// retired key's position.
func (b *build) checkRetired(m *ast.Module) {
	ast.WalkRefs(m, func(ref ast.Ref) bool {
		if !ref[0].Equal(ast.InputRootDocument) {
			return false
		}
		for i, t := range ref[1:] {
			s, ok := t.Value.(ast.String)
			if !ok {
				continue
			}
			now, retired := retiredInputNames[string(s)]
			if !retired {
				continue
			}
			loc := t.Location
			if loc == nil {
				loc = ref[0].Location
			}
			old := ref[:i+2].String()
			b.retired[location{loc.File, loc.Row, loc.Col}] = true
			b.errs = append(b.errs, b.src.error(policy.CodeCompile, loc,
				fmt.Sprintf("%s was renamed: use %s (turngate's input uses the reference's camelCase names)", old, ref[:i+1].Append(ast.StringTerm(now)).String())))
		}
		return false
	})
}
