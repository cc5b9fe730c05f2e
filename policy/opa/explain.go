package opa

import (
	"context"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// WhyNotToolCall lists the definitions of tc's decision rules (block,
// substitute, approval, patch) whose body did not succeed, each with the
// first body expression that failed. It runs a separate, traced
// evaluation of the generic query under the policy's deadline: for dry
// runs only, never on a turn. At most policy.MaxNotFired definitions.
func (p *Policy) WhyNotToolCall(ctx context.Context, tc *engine.ToolCallContext) []policy.NotFired {
	var raws rawTerms
	in, err := toolCallInput(tc, p.schemas, &raws)
	if err != nil {
		return nil
	}
	return p.whyNot(ctx, p.toolCall, ToolCallPackage, in, ruleBlock, ruleSubstitute, ruleApproval, rulePatch)
}

// WhyNotToolResult is WhyNotToolCall for the tool_result rules (patch,
// redact).
func (p *Policy) WhyNotToolResult(ctx context.Context, rc *engine.ToolCallResultContext) []policy.NotFired {
	var raws rawTerms
	in, err := toolResultInput(rc, p.schemas, &raws)
	if err != nil {
		return nil
	}
	return p.whyNot(ctx, p.toolResult, ToolResultPackage, in, rulePatch, ruleRedact)
}

type rowKey struct {
	file     string
	row, col int
}

func keyOfLocation(l *ast.Location) rowKey { return rowKey{l.File, l.Row, l.Col} }

func (p *Policy) whyNot(ctx context.Context, pq *rego.PreparedEvalQuery, pkg string, input ast.Value, names ...string) []policy.NotFired {
	if pq == nil {
		return nil
	}
	stopper := topdown.NewCancel()
	deadline := time.AfterFunc(p.opts.timeout(), stopper.Cancel)
	defer deadline.Stop()
	if ctx.Done() != nil {
		defer context.AfterFunc(ctx, stopper.Cancel)()
	}
	buf := topdown.NewBufferTracer()
	// Without rule indexing every definition is entered, so one the index
	// would skip still shows the expression that fails. An evaluation
	// error is the untraced evaluation's to report; the trace up to it
	// still explains the rules it reached.
	_, _ = pq.Eval(ctx, rego.EvalParsedInput(input), rego.EvalQueryTracer(buf), rego.EvalRuleIndexing(false), rego.EvalEarlyExit(false),
		rego.EvalExternalCancel(stopper), noMetrics)
	exited := map[rowKey]bool{}
	for _, e := range *buf {
		if r, ok := e.Node.(*ast.Rule); ok && e.Op == topdown.ExitOp && r.Location != nil {
			exited[keyOfLocation(r.Location)] = true
		}
	}
	out := []policy.NotFired{}
	for _, name := range names {
		rule := "data." + pkg + "." + name
		for _, loc := range p.rules[rule] {
			if exited[keyOfLocation(loc)] || len(out) == policy.MaxNotFired {
				continue
			}
			nf := policy.NotFired{Rule: rule, Location: policy.Location{File: loc.File, Line: loc.Row, Column: loc.Col}}
			end := loc.Row + strings.Count(string(loc.Text), "\n")
			for _, e := range *buf {
				l := e.Location
				if _, ok := e.Node.(*ast.Expr); !ok || e.Op != topdown.FailOp || l == nil ||
					l.File != loc.File || l.Row < loc.Row || l.Row > end {
					continue
				}
				nf.Failed = string(l.Text)
				nf.FailedAt = &policy.Location{File: l.File, Line: l.Row, Column: l.Col}
				break
			}
			out = append(out, nf)
		}
	}
	return out
}
