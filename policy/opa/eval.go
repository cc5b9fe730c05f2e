package opa

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/print"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// ToolCall evaluates data.turngate.tool_call for tc (input: ToolCallInput)
// and maps the document to the engine's decision:
//
//   - block contains reason: any member → block; Reason is the reasons
//     sorted and joined with "; ".
//   - substitute := {"output": o, "input"?: i}: → substitute with Output o
//     (and the attributed Input i).
//   - approval contains reason: a string (the chat user may approve) or an
//     object {"reason": s, "approvers": ["role:NAME", …]} (only principals
//     holding one of the roles may) → approval with the reasons sorted by
//     canonical JSON, and Input the patched input when patches apply.
//   - patch contains op: RFC 6902 ops, applied to the model's input one by
//     one in the order of their canonical JSON (keys sorted) → allow with
//     the patched Input.
//   - none of these → nil (allow unchanged).
//
// Precedence is block > substitute > approval > patch > allow. Every failure returns a
// *policy.Error for the caller to fail closed on: CodeEval (a runtime or
// builtin error), CodeConflict (a complete rule with two values, e.g. two
// different substitutes), CodeTimeout (the Options.Timeout deadline),
// CodeUndefined (no decision document, e.g. the package is missing) and
// CodeValidation (a malformed decision: a block member that is not a
// string, a substitute without output, an invalid patch op or one that does
// not apply, or a model input that is not JSON).
func (p *Policy) ToolCall(ctx context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, Trace, error) {
	var raws rawTerms
	in, err := toolCallInput(tc, p.schemas, &raws)
	if err != nil {
		return nil, Trace{}, &policy.Error{Code: policy.CodeValidation, Message: fmt.Sprintf("building tool_call input: %v", err)}
	}
	doc, tr, err := p.eval(ctx, p.toolCall, p.toolCallSpec, ToolCallPackage, in)
	tr.input, tr.raws = in, raws
	if err != nil {
		return nil, tr, err
	}
	d, fired, err := decideToolCall(doc, tc.Input)
	tr.RulesFired, tr.RulesFiredAt = fired, p.definedAt.At(fired)
	if err == nil {
		tr.Shadow = p.shadowToolCall(ctx, in, tc, d)
	}
	return d, tr, p.locate(err)
}

// ToolResult evaluates data.turngate.tool_result for rc (input:
// ToolResultInput) and returns the output the model sees, or nil when it is
// unchanged. The document's rules are `patch contains op` (RFC 6902 ops over
// the output, applied as in ToolCall) and `redact contains path` (JSON
// pointers whose values become "[REDACTED]"; pointers that select nothing
// are skipped). Patches apply first, then redactions. Failures are returned
// as for ToolCall.
func (p *Policy) ToolResult(ctx context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, Trace, error) {
	var raws rawTerms
	in, err := toolResultInput(rc, p.schemas, &raws)
	if err != nil {
		return nil, Trace{}, &policy.Error{Code: policy.CodeValidation, Message: fmt.Sprintf("building tool_result input: %v", err)}
	}
	doc, tr, err := p.eval(ctx, p.toolResult, p.toolResultSpec, ToolResultPackage, in)
	tr.input, tr.raws = in, raws
	if err != nil {
		return nil, tr, err
	}
	d, fired, err := decideToolResult(doc, rc.Output)
	tr.RulesFired, tr.RulesFiredAt = fired, p.definedAt.At(fired)
	if err == nil {
		tr.Shadow = p.shadowToolResult(ctx, in, rc, d)
	}
	return d, tr, p.locate(err)
}

// locate points a malformed-decision error at its rule's definition; when
// the rule has several, at the first, and the message lists them all.
func (p *Policy) locate(err error) error {
	pe, ok := err.(*policy.Error)
	if !ok || pe.Rule == "" || pe.Location.File != "" {
		return err
	}
	locs := p.rules[pe.Rule]
	if len(locs) == 0 {
		return err
	}
	msg := pe.Message
	if len(locs) > 1 {
		at := make([]string, len(locs))
		for i, l := range locs {
			at[i] = fmt.Sprintf("%s:%d:%d", l.File, l.Row, l.Col)
		}
		msg += fmt.Sprintf(" (%s is defined at %s)", pe.Rule, strings.Join(at, ", "))
	}
	located := p.src.error(pe.Code, locs[0], msg)
	located.Rule = pe.Rule
	return located
}

// eval runs a prepared decision query under the policy's deadline and
// returns the decision document: the key's residual answers when spec has
// one that succeeds, the generic query pq otherwise.
func (p *Policy) eval(ctx context.Context, pq *rego.PreparedEvalQuery, spec *specialiser, pkg string, input ast.Value) (ast.Value, Trace, error) {
	var tr Trace
	if pq == nil {
		return nil, tr, &policy.Error{Code: policy.CodeUndefined, Message: fmt.Sprintf("data.%s is undefined: no module declares package %s", pkg, pkg)}
	}
	if err := ctx.Err(); err != nil {
		// OPA notices cancellation asynchronously; a short evaluation could
		// still succeed for a turn that is already over.
		return nil, tr, p.evalError(ctx, false, pkg, err)
	}
	// A residual built for this call (forced) has a deadline of its own.
	residual := spec.query(ctx, keyOf(input))
	// The deadline is a timer that cancels the evaluation, as is the
	// caller's context. With a Cancel of its own, OPA starts no goroutine
	// per evaluation to watch a context.
	stopper := topdown.NewCancel()
	var timedOut atomic.Bool
	deadline := time.AfterFunc(p.opts.timeout(), func() {
		timedOut.Store(true)
		stopper.Cancel()
	})
	defer deadline.Stop()
	if ctx.Done() != nil {
		defer context.AfterFunc(ctx, stopper.Cancel)()
	}
	evalCtx := ctx
	if p.opts.AllowNetwork {
		// Network builtins bound their requests by the context's deadline.
		var cancel context.CancelFunc
		evalCtx, cancel = context.WithTimeout(ctx, p.opts.timeout())
		defer cancel()
	}
	if doc, ok := spec.eval(evalCtx, residual, input, stopper); ok {
		return doc, tr, nil
	}
	prints := &printHook{}
	rs, err := pq.Eval(evalCtx, rego.EvalParsedInput(input), rego.EvalPrintHook(prints),
		rego.EvalExternalCancel(stopper), noMetrics)
	tr.Prints = prints.lines
	if err != nil {
		return nil, tr, p.evalError(ctx, timedOut.Load(), pkg, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, tr, &policy.Error{Code: policy.CodeUndefined, Message: fmt.Sprintf("data.%s is undefined", pkg)}
	}
	doc, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		return nil, tr, &policy.Error{Code: policy.CodeEval, Message: fmt.Sprintf("data.%s: unexpected result type %T", pkg, rs[0].Expressions[0].Value)}
	}
	return doc, tr, nil
}

// noMetrics gives evaluations the no-op metrics: nobody reads them, and
// the default set costs maps and timers per evaluation.
var noMetrics = rego.EvalMetrics(metrics.NoOp())

// evalError converts an evaluation failure to a positioned diagnostic. ctx
// is the caller's context; timedOut says whether the Options.Timeout
// deadline passed.
func (p *Policy) evalError(ctx context.Context, timedOut bool, pkg string, err error) *policy.Error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &policy.Error{Code: policy.CodeTimeout, Message: fmt.Sprintf("evaluating data.%s: the caller's deadline passed", pkg)}
	case ctx.Err() != nil:
		return &policy.Error{Code: policy.CodeEval, Message: fmt.Sprintf("evaluating data.%s: %v", pkg, ctx.Err())}
	case timedOut:
		return &policy.Error{Code: policy.CodeTimeout, Message: fmt.Sprintf(
			"evaluating data.%s: evaluation exceeded the %v deadline (a runaway rule, or CPUs too saturated to finish it)",
			pkg, p.opts.timeout())}
	}
	var te *topdown.Error
	if !errors.As(err, &te) {
		return &policy.Error{Code: policy.CodeEval, Message: fmt.Sprintf("evaluating data.%s: %v", pkg, err)}
	}
	code := policy.CodeEval
	if te.Code == topdown.ConflictErr {
		code = policy.CodeConflict
	}
	return p.src.error(code, te.Location, fmt.Sprintf("evaluating data.%s: %s: %s", pkg, te.Code, te.Message))
}

// printHook collects print() output of one evaluation.
type printHook struct {
	lines []string
}

// Print records one print() line.
func (h *printHook) Print(_ print.Context, s string) error {
	h.lines = append(h.lines, s)
	return nil
}
