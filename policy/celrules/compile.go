package celrules

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
)

// Options bound compilation and evaluation.
type Options struct {
	// CostLimit is the runtime cost limit of one evaluation of an
	// expression with loops whose static estimate exceeds it (cel-go cost
	// units, roughly one per operation and per list element visited); the
	// package doc says why other expressions need no runtime tracker. Zero
	// means DefaultCostLimit.
	CostLimit uint64
	// MaxEstimatedCost rejects, at load, an expression whose worst-case
	// static cost estimate exceeds it. Zero means DefaultMaxEstimatedCost.
	MaxEstimatedCost uint64
	// EvalTimeout bounds one hook evaluation (all its rules) in wall-clock
	// time, on top of the caller's context. cel-go's runtime cost tracking
	// slows down quadratically in long comprehensions, so the cost limit
	// alone can take minutes to trip; this deadline makes a runaway rule a
	// prompt CodeTimeout error. Zero means DefaultEvalTimeout.
	EvalTimeout time.Duration
	// StateNames are the declared state names (policy/state) rules may
	// read as state.NAME; any other name is a load error. Nil declares
	// none.
	StateNames []string
}

// Default limits. The runtime limit stops a runaway expression after about
// a millisecond of work; the static limit is looser because worst-case
// estimates assume every list and string is as large as the bounds below.
const (
	DefaultCostLimit        = 1_000_000
	DefaultMaxEstimatedCost = 10_000_000
	DefaultEvalTimeout      = 100 * time.Millisecond
)

// interruptEvery is how many comprehension iterations pass between checks
// of the context, so a cancelled turn stops a long loop promptly.
const interruptEvery = 100

func (o Options) withDefaults() Options {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.EvalTimeout == 0 {
		o.EvalTimeout = DefaultEvalTimeout
	}
	if o.MaxEstimatedCost == 0 {
		o.MaxEstimatedCost = DefaultMaxEstimatedCost
	}
	return o
}

// Set is the compiled CEL rules of a revision, in order (files by path,
// rules in file order). It is immutable and safe for concurrent use.
type Set struct {
	opts      Options
	turnRules []*rule
	stepRules []*rule
	// persistRules are the beforePersist rules (persist.go).
	persistRules []*rule
	// errorRules are the onChatError rules (chaterror.go).
	errorRules []*rule
	// turnShadow, stepShadow, persistShadow and errorShadow say whether
	// the hook has shadow rules.
	turnShadow, stepShadow, persistShadow, errorShadow bool
	// warnings are the statically visible conflicts (see conflictWarnings).
	warnings policy.Errors
	// toolNames are the tool names the rules spell out (toolnames.go).
	toolNames []policy.ToolName
	// stateReads lists by hook the declared states its rules read.
	stateReads map[string][]string
	// definedAt is each rule's file:line, for Trace.RulesFiredAt.
	definedAt policy.RuleLocations
}

// rule is one compiled rule.
type rule struct {
	id    string // "file.yaml#rule-name"
	index int    // its place in its hook's evaluation order
	loc   policy.Location
	// shadow rules are evaluated but never enforced.
	shadow bool
	when   *expr // nil means always
	sets   []ruleSet
}

// ruleSet is one compiled entry of a rule's set map.
type ruleSet struct {
	field *fieldSpec
	expr  *expr
	// value is the decoded constant of a field that copies it (see
	// fieldSpec.copies); nil means decode the expression's value.
	value any
}

// expr is one compiled expression and where it is written.
type expr struct {
	prg     cel.Program
	loops   bool // has comprehensions: interruptible, under the deadline
	tracked bool // has cel-go's runtime cost limit (see compileExpr)
	// constant is the value of an expression that reads no variable,
	// computed at load; nil for the others.
	constant ref.Val
	// checked is the type-checked expression, for the load-time checks
	// of its shape (compiler.checkKeys).
	checked *cel.Ast
	loc     policy.Location
	// text is the expression as written (for explanations).
	text string
}

// HasBeforeTurn reports whether the set has beforeTurn rules.
func (s *Set) HasBeforeTurn() bool { return len(s.turnRules) > 0 }

// HasBeforeStep reports whether the set has beforeStep rules.
func (s *Set) HasBeforeStep() bool { return len(s.stepRules) > 0 }

// RuleInfo describes one compiled rule.
type RuleInfo struct {
	// ID is "file.yaml#rule-name", as decision records name the rule.
	ID string
	// Location is where the rule's name is written.
	Location policy.Location
	// Shadow marks a rule that is evaluated but never enforced.
	Shadow bool
}

// Rules returns a hook's rules in evaluation order.
func (s *Set) Rules(hook string) []RuleInfo {
	rules := s.turnRules
	switch hook {
	case policy.HookBeforeStep:
		rules = s.stepRules
	case policy.HookBeforePersist:
		rules = s.persistRules
	case policy.HookOnChatError:
		rules = s.errorRules
	}
	out := make([]RuleInfo, len(rules))
	for i, r := range rules {
		out[i] = RuleInfo{ID: r.id, Location: r.loc, Shadow: r.shadow}
	}
	return out
}

// Warnings returns the conflicts visible without evaluating anything: two
// enforced rules of a hook, under the same condition, setting a last-wins
// field to different constants. They do not stop the set from loading.
func (s *Set) Warnings() policy.Errors { return s.warnings }

// Compile parses and type-checks every rule file. Files are taken in path
// order. All errors of all files are returned at once, capped at
// policy.MaxErrors, each positioned at the offending text; a set is
// returned only when there are none.
func Compile(files []policy.File, opts Options) (*Set, policy.Errors) {
	opts = opts.withDefaults()
	envs, err := hookEnvs()
	if err != nil {
		return nil, policy.Errors{{Code: policy.CodeCompile, Message: "building CEL environment: " + err.Error()}}
	}
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b policy.File) int { return strings.Compare(a.Path, b.Path) })
	c := &compiler{opts: opts, envs: envs, stateReads: map[string]map[string]bool{}}
	s := &Set{opts: opts, definedAt: policy.RuleLocations{}}
	var all []compiledRule
	for _, f := range files {
		src := newSource(f)
		specs, errs := parseRules(src)
		first := len(c.errs)
		c.errs = append(c.errs, errs...)
		for _, spec := range specs {
			r := c.compileRule(src, spec)
			if r == nil {
				continue
			}
			all = append(all, compiledRule{src, spec, r})
			rules, shadow := &s.turnRules, &s.turnShadow
			switch spec.hook {
			case policy.HookBeforeStep:
				rules, shadow = &s.stepRules, &s.stepShadow
			case policy.HookBeforePersist:
				rules, shadow = &s.persistRules, &s.persistShadow
			case policy.HookOnChatError:
				rules, shadow = &s.errorRules, &s.errorShadow
			}
			r.index = len(*rules)
			*rules = append(*rules, r)
			s.definedAt[r.id] = fmt.Sprintf("%s:%d", r.loc.File, r.loc.Line)
			*shadow = *shadow || r.shadow
		}
		sortByPosition(c.errs[first:])
		if len(c.errs) >= policy.MaxErrors {
			break
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs[:min(len(c.errs), policy.MaxErrors)]
	}
	s.warnings = conflictWarnings(all)
	s.toolNames = c.toolNames
	s.stateReads = sortedReads(c.stateReads)
	return s, nil
}

// compiler carries one Compile call's state.
type compiler struct {
	opts Options
	envs map[string]*cel.Env
	errs policy.Errors
	// toolNames are the tool-name literals of the rules (toolnames.go).
	toolNames []policy.ToolName
	// stateReads collects by hook the declared states the rules read.
	stateReads map[string]map[string]bool
}

// compileRule compiles a rule's expressions; it returns nil when any of
// them has an error (the errors are collected in c.errs).
func (c *compiler) compileRule(src *source, spec *ruleSpec) *rule {
	before := len(c.errs)
	n := nameNode(spec.node)
	r := &rule{id: src.path + "#" + spec.name, shadow: spec.shadow,
		loc: policy.Location{File: src.path, Line: n.Line, Column: n.Column}}
	env := c.envs[spec.hook]
	if spec.when != nil {
		r.when = c.compileExpr(src, env, spec, "", spec.when, func(t *types.Type) string {
			if t.Kind() == types.BoolKind || t.Kind() == types.DynKind {
				return ""
			}
			return "when must be bool but expression is " + t.String()
		})
	}
	for _, set := range spec.sets {
		f := fieldFor(spec.hook, set.field)
		switch {
		case f == nil:
			c.add(src.nodeError(policy.CodeSchema, set.key,
				fmt.Sprintf("unknown field %q for %s (want one of: %s)", set.field, spec.hook, fieldNames(spec.hook))), spec.name, set.field)
			continue
		case f.decode == nil:
			c.add(src.nodeError(policy.CodeSchema, set.key, toolsFieldError), spec.name, set.field)
			continue
		}
		e := c.compileExpr(src, env, spec, set.field, set.expr, func(t *types.Type) string {
			if f.accepts(t) {
				return ""
			}
			return fmt.Sprintf("field %s must be %s but expression is %s", f.name, f.wantString(), t.String())
		})
		if e != nil && (e.constant != nil || c.checkKeys(src, spec, f, set.expr, e)) {
			r.sets = append(r.sets, ruleSet{field: f, expr: e, value: c.decodeConstant(src, spec, f, e)})
		}
	}
	if spec.hook == policy.HookBeforePersist {
		c.checkPersistRule(src, spec, r)
	}
	if len(c.errs) > before {
		return nil
	}
	return r
}

// compileExpr parses, type-checks, cost-checks and plans one expression.
// typeErr returns a message when the result type does not fit.
func (c *compiler) compileExpr(src *source, env *cel.Env, spec *ruleSpec, field string, n *yaml.Node, typeErr func(*types.Type) string) *expr {
	ast, iss := env.Parse(n.Value)
	if iss.Err() == nil {
		parsed := ast
		ast, iss = env.Check(parsed)
		if iss.Err() != nil {
			c.celErrors(src, spec, field, n, iss, policy.CodeType, func(e *cel.Error) string { return fieldHint(env, parsed, e) })
			return nil
		}
	} else {
		c.celErrors(src, spec, field, n, iss, policy.CodeCompile, nil)
		return nil
	}
	c.collectToolNames(src, n, field, ast)
	before := len(c.errs)
	if c.checkState(src, spec, field, n, ast); len(c.errs) > before {
		return nil
	}
	line, col := c.exprPosition(src, n, 0)
	if msg := typeErr(ast.OutputType()); msg != "" {
		c.add(src.errorAt(policy.CodeType, line, col, msg), spec.name, field)
		return nil
	}
	est, err := env.EstimateCost(ast, estimator{})
	if err != nil {
		c.add(src.errorAt(policy.CodeCost, line, col, "estimating cost: "+err.Error()), spec.name, field)
		return nil
	}
	if est.Max > c.opts.MaxEstimatedCost {
		c.add(src.errorAt(policy.CodeCost, line, col, fmt.Sprintf(
			"estimated worst-case cost %d exceeds the limit %d; bound the loops (e.g. lastMessages(turn.messages, 20)) or simplify",
			est.Max, c.opts.MaxEstimatedCost)), spec.name, field)
		return nil
	}
	// Only comprehensions can make an expression run long: without them
	// each operation runs once, the static estimate bounds the sum, and a
	// runtime tracker could only charge an operation after it returned, so
	// loop-free expressions evaluate without the context. Expressions with
	// loops are interruptible; cel-go's runtime cost tracker (which doubles
	// the cost of a typical rule set) is added when the worst-case estimate
	// exceeds CostLimit. An estimate within the limit is a proof for
	// contexts within the size bounds below; larger contexts are cut off by
	// the evaluation deadline.
	loops := len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0
	tracked := loops && est.Max > c.opts.CostLimit
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if loops {
		opts = append(opts, cel.InterruptCheckFrequency(interruptEvery))
	}
	if tracked {
		opts = append(opts, cel.CostLimit(c.opts.CostLimit))
	}
	prg, err := program(env, ast, opts)
	if err != nil {
		c.add(src.errorAt(policy.CodeCompile, line, col, "planning expression: "+err.Error()), spec.name, field)
		return nil
	}
	e := &expr{prg: prg, loops: loops, tracked: tracked, checked: ast, loc: policy.Location{File: src.path, Line: line, Column: col}, text: n.Value}
	if readsVariables(ast) {
		return e
	}
	// An expression that reads no variable has one value: compute it now,
	// so evaluation skips it and an expression that always fails is a load
	// error rather than a failed turn.
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.EvalTimeout)
	defer cancel()
	v, _, err := prg.ContextEval(ctx, interpreter.EmptyActivation())
	if err == nil && types.IsUnknownOrError(v) {
		err = fmt.Errorf("%v", v)
	}
	if err != nil {
		c.add(src.errorAt(policy.CodeEval, line, col, "the expression reads no variable and always fails: "+err.Error()), spec.name, field)
		return nil
	}
	e.constant = v
	return e
}

// program plans a checked expression. cel-go panics while folding some
// constants it cannot represent (a map literal with a bytes key); the panic
// is returned as an error.
func program(env *cel.Env, ast *cel.Ast, opts []cel.ProgramOption) (prg cel.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return env.Program(ast, opts...)
}

// readsVariables reports whether a checked expression refers to one of the
// hook variables (turn, step, principal, now).
func readsVariables(ast *cel.Ast) bool {
	for _, r := range ast.NativeRep().ReferenceMap() {
		if len(r.OverloadIDs) == 0 && hookVariables[r.Name] {
			return true
		}
	}
	return false
}

// hookVariables are the names rules read the hook context through.
var hookVariables = map[string]bool{"turn": true, "step": true, "principal": true, "now": true, stateVariable: true,
	"message": true, "agent": true, "sessionId": true, "requestId": true, "deadline": true, "aborted": true, "error": true}

// decodeConstant validates, at load, a field value that does not depend on
// the hook context (a literal toolChoice, timeout, maxSteps …), so a bad
// constant is a load error rather than a failed turn. It returns the
// decoded value when the field copies it (see fieldSpec.copies), else nil.
func (c *compiler) decodeConstant(src *source, spec *ruleSpec, f *fieldSpec, e *expr) any {
	if e.constant == nil {
		return nil // it reads the context: checked when evaluated
	}
	v, err := f.decode(e.constant)
	if err != nil {
		c.add(src.errorAt(policy.CodeType, e.loc.Line, e.loc.Column,
			fmt.Sprintf("field %s: %v", f.name, err)), spec.name, f.name)
		return nil
	}
	if !f.copies {
		return nil
	}
	return v
}

// checkKeys checks the constant keys of the map literals an object
// field's expression that reads the context evaluates to (the expression
// itself, or the branches of its conditionals) against the field's keys,
// as decodeConstant's decoding checks a constant's; false when one is not
// a key of the field.
func (c *compiler) checkKeys(src *source, spec *ruleSpec, f *fieldSpec, n *yaml.Node, e *expr) bool {
	if f.keys == nil {
		return true
	}
	info := e.checked.NativeRep().SourceInfo()
	ok := true
	var walk func(x celast.Expr)
	walk = func(x celast.Expr) {
		switch x.Kind() {
		case celast.CallKind:
			if call := x.AsCall(); call.FunctionName() == operators.Conditional {
				walk(call.Args()[1])
				walk(call.Args()[2])
			}
		case celast.MapKind:
			for _, entry := range x.AsMap().Entries() {
				key := entry.AsMapEntry().Key()
				if key.Kind() != celast.LiteralKind {
					continue
				}
				name, isString := key.AsLiteral().Value().(string)
				if !isString || slices.Contains(f.keys, name) {
					continue
				}
				ok = false
				msg := fmt.Sprintf("field %s: unknown key %q (want %s)", f.name, name, strings.Join(f.keys, ", "))
				if meant := suggest.Closest(name, f.keys); meant != "" {
					msg += fmt.Sprintf("; did you mean %q?", meant)
				}
				at := info.GetStartLocation(key.ID())
				line, col := c.exprPosition(src, n, runeOffset(n.Value, at.Line(), at.Column()))
				c.add(src.errorAt(policy.CodeType, line, col, msg), spec.name, f.name)
			}
		}
	}
	walk(e.checked.NativeRep().Expr())
	return ok
}

// celErrors converts cel-go's issues into positioned diagnostics, mapping
// each expression offset back into the YAML file; hint, when not nil, adds
// to a message (see fieldHint).
func (c *compiler) celErrors(src *source, spec *ruleSpec, field string, n *yaml.Node, iss *cel.Issues, code string, hint func(*cel.Error) string) {
	var offsets []int
	for _, e := range iss.Errors() {
		if offsets == nil {
			offsets = src.scalarPositions(n)
		}
		off := runeOffset(n.Value, e.Location.Line(), e.Location.Column())
		line, col := src.position(offsets[min(off, len(offsets)-1)])
		msg := e.Message
		if spec.hook == policy.HookBeforeTurn && strings.Contains(msg, "undeclared reference to 'step'") {
			msg += " (step is only available in beforeStep rules)"
		}
		if spec.hook == policy.HookBeforePersist && (strings.Contains(msg, "undeclared reference to 'turn'") || strings.Contains(msg, "undeclared reference to 'step'")) {
			msg += " (beforePersist rules see message, principal, agent, sessionId, requestId, deadline, aborted and now)"
		}
		if spec.hook == policy.HookOnChatError && (strings.Contains(msg, "undeclared reference to 'turn'") || strings.Contains(msg, "undeclared reference to 'step'")) {
			msg += " (onChatError rules see error, principal, agent, sessionId, requestId, deadline, aborted and now)"
		}
		if hint != nil {
			msg += hint(e)
		}
		c.add(src.errorAt(code, line, col, msg), spec.name, field)
	}
}

// exprPosition returns the file position of a rune offset in an
// expression scalar.
func (c *compiler) exprPosition(src *source, n *yaml.Node, off int) (int, int) {
	offsets := src.scalarPositions(n)
	return src.position(offsets[min(off, len(offsets)-1)])
}

func (c *compiler) add(e *policy.Error, ruleName, field string) {
	e.Rule, e.Field = ruleName, field
	c.errs = append(c.errs, e)
}

// sortByPosition orders one file's diagnostics by line and column.
func sortByPosition(errs policy.Errors) {
	slices.SortStableFunc(errs, func(a, b *policy.Error) int {
		if a.Location.Line != b.Location.Line {
			return a.Location.Line - b.Location.Line
		}
		return a.Location.Column - b.Location.Column
	})
}

// runeOffset converts cel-go's 1-based line and 0-based rune column into a
// rune offset of the expression text.
func runeOffset(text string, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			break
		}
		off += utf8.RuneCountInString(text[:i+1])
		text = text[i+1:]
	}
	return off + max(col, 0)
}

// hookEnvs builds the hooks' CEL environments once: they are immutable and
// safe for concurrent use.
var hookEnvs = sync.OnceValues(func() (map[string]*cel.Env, error) {
	turnEnv, err := newEnv(policy.HookBeforeTurn)
	if err != nil {
		return nil, err
	}
	stepEnv, err := newEnv(policy.HookBeforeStep)
	if err != nil {
		return nil, err
	}
	persistEnv, err := newEnv(policy.HookBeforePersist)
	if err != nil {
		return nil, err
	}
	errorEnv, err := newEnv(policy.HookOnChatError)
	if err != nil {
		return nil, err
	}
	return map[string]*cel.Env{policy.HookBeforeTurn: turnEnv, policy.HookBeforeStep: stepEnv,
		policy.HookBeforePersist: persistEnv, policy.HookOnChatError: errorEnv}, nil
})

// newEnv declares the variables a hook's rules see: principal and now
// everywhere; turn and state in beforeTurn and beforeStep, step in
// beforeStep only; message in beforePersist, error in onChatError, and in
// both the turn's identity as top-level variables (identityVariables).
func newEnv(hook string) (*cel.Env, error) {
	p := newProvider()
	opts := []cel.EnvOption{
		cel.CustomTypeProvider(p),
		cel.CustomTypeAdapter(p),
		cel.Variable("principal", principalType.typ),
		cel.Variable("now", cel.TimestampType),
		cel.OptionalTypes(), // regex.extract returns an optional
		ext.Strings(), ext.Lists(), ext.Math(), ext.Sets(), ext.Encoders(), ext.Regex(),
		library(),
		// After the extensions: their estimates of the same overloads are
		// replaced.
		pairwiseEstimates(),
	}
	switch hook {
	case policy.HookBeforePersist:
		opts = append(append(opts, cel.Variable("message", messageType.typ)), identityVariables...)
	case policy.HookOnChatError:
		opts = append(append(opts, cel.Variable("error", chatErrorType.typ)), identityVariables...)
	case policy.HookBeforeStep:
		opts = append(opts, cel.Variable("turn", turnType.typ), cel.Variable(stateVariable, dynMapType),
			cel.Variable("step", stepType.typ))
	default:
		opts = append(opts, cel.Variable("turn", turnType.typ), cel.Variable(stateVariable, dynMapType))
	}
	return cel.NewEnv(opts...)
}

// identityVariables are the turn's identity in beforePersist and
// onChatError, which have no turn variable: what turn.agent, turn.sessionId,
// turn.requestId, turn.deadline and turn.aborted are in the turn hooks.
var identityVariables = []cel.EnvOption{
	cel.Variable("agent", cel.StringType), cel.Variable("sessionId", cel.StringType), cel.Variable("requestId", cel.StringType),
	cel.Variable("deadline", cel.TimestampType), cel.Variable("aborted", cel.BoolType),
}

// Size bounds assumed by the static cost estimate for values whose size
// only the hook context knows. They make estimates finite and comparable;
// the runtime CostLimit measures the real values.
const (
	estStringSize = 10_000 // characters in a prompt, message text or field
	estListSize   = 1_000  // messages, tools, body entries
	estInnerSize  = 100    // parts of a message, calls of a step, roles, attachments
)

// constInt returns the value of an int literal argument.
func constInt(n checker.AstNode) (int64, bool) {
	e := n.Expr()
	if e.Kind() != celast.LiteralKind {
		return 0, false
	}
	i, ok := e.AsLiteral().(types.Int)
	return int64(i), ok
}

// estimator supplies size bounds and helper-function costs to cel-go's
// static cost estimate.
type estimator struct{}

func (estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	switch n.Type().Kind() {
	case types.StringKind, types.BytesKind, types.DynKind:
		return &checker.SizeEstimate{Min: 0, Max: estStringSize}
	case types.ListKind, types.MapKind:
		if p := n.Path(); len(p) > 0 {
			switch p[len(p)-1] {
			case "content", "toolCalls", "toolResults", "roles", "steps", "context", "attachments":
				return &checker.SizeEstimate{Min: 0, Max: estInnerSize}
			}
		}
		return &checker.SizeEstimate{Min: 0, Max: estListSize}
	}
	return nil
}

func (estimator) EstimateCallCost(fn, _ string, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch fn {
	case "pruneMessages", "lastMessages":
		size := checker.SizeEstimate{Min: 0, Max: estListSize}
		if s := args[0].ComputedSize(); s != nil {
			size = *s
		}
		// lastMessages(list, 20) returns at most 20 messages.
		if n, ok := constInt(args[1]); ok && fn == "lastMessages" && uint64(max(n, 0)) < size.Max {
			size.Max = uint64(max(n, 0))
		}
		return &checker.CallEstimate{
			CostEstimate: checker.CostEstimate{Min: 1, Max: size.Max * estInnerSize},
			ResultSize:   &size,
		}
	}
	return nil
}

// pairwiseEstimates re-estimates the extensions' functions that compare
// every element of a list with every element of another (sets.contains,
// sets.intersects, sets.equivalent) or of itself (distinct). cel-go charges
// one unit per comparison, but comparing two messages, tools or steps is a
// deep comparison, and a dyn element may be a whole JSON document: such an
// element is charged estInnerSize units. Without this,
// sets.contains(turn.messages, turn.messages) passes the load-time estimate
// and then runs for seconds on a long conversation, and a single builtin
// call can be stopped by neither the deadline nor the runtime cost limit
// (cel-go charges a call after it returns).
func pairwiseEstimates() cel.EnvOption {
	return cel.CostEstimatorOptions(
		checker.OverloadCostEstimate("list_sets_contains_list", pairwise(1)),
		checker.OverloadCostEstimate("list_sets_intersects_list", pairwise(1)),
		checker.OverloadCostEstimate("list_sets_equivalent_list", pairwise(2)),
		checker.OverloadCostEstimate("list_distinct", func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
			if target == nil || len(args) != 0 {
				return nil
			}
			size := sizeOf(est, *target)
			return &checker.CallEstimate{
				CostEstimate: size.Multiply(size).MultiplyByCostFactor(float64(2 * equalityCost(*target))),
				ResultSize:   &size,
			}
		}),
	)
}

// pairwise estimates a function of two lists that compares each element of
// one with each of the other, factor times.
func pairwise(factor uint64) checker.FunctionEstimator {
	return func(est checker.CostEstimator, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 2 {
			return nil
		}
		unit := factor * max(equalityCost(args[0]), equalityCost(args[1]))
		return &checker.CallEstimate{CostEstimate: sizeOf(est, args[0]).Multiply(sizeOf(est, args[1])).MultiplyByCostFactor(float64(unit))}
	}
}

// sizeOf is a node's size estimate: computed by the checker, else from the
// estimator's bounds, else unbounded.
func sizeOf(est checker.CostEstimator, n checker.AstNode) checker.SizeEstimate {
	if s := n.ComputedSize(); s != nil {
		return *s
	}
	if s := est.EstimateSize(n); s != nil {
		return *s
	}
	return checker.SizeEstimate{Min: 0, Max: math.MaxUint64}
}

// equalityCost is the estimated cost of comparing two elements of a list
// node: one unit for scalars, estInnerSize for objects, containers and dyn.
func equalityCost(list checker.AstNode) uint64 {
	t := list.Type()
	if t.Kind() != types.ListKind || len(t.Parameters()) == 0 {
		return estInnerSize
	}
	switch t.Parameters()[0].Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind, types.BytesKind,
		types.NullTypeKind, types.TimestampKind, types.DurationKind:
		return 1
	}
	return estInnerSize
}
