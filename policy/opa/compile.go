package opa

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/turngate/turngate/policy"
)

// DefaultTimeout is the evaluation deadline when Options.Timeout is zero. It
// bounds a runaway rule; it is not a latency budget. A normal decision takes
// 25-45µs of CPU, but the deadline is wall-clock time, and on saturated CPUs
// the wait for a CPU counts against it: at 100ms, 5 of 72,411 decisions under
// load failed closed although their rules were cheap. One second still stops
// a rule that loops over a huge input long before a turn would be abandoned.
const DefaultTimeout = time.Second

// DefaultTestTimeout is the per-test deadline of RunTests when
// Options.TestTimeout is zero. Tests run in CI and under the race detector,
// so they get more room than a live decision.
const DefaultTestTimeout = 5 * time.Second

// Options configures compilation and evaluation.
type Options struct {
	// Timeout is the per-evaluation deadline (default DefaultTimeout).
	Timeout time.Duration
	// AllowNetwork enables the builtins that reach the network (http.send,
	// net.lookup_ip_addr). By default they are refused at compile time.
	AllowNetwork bool
	// TestTimeout is RunTests' per-test deadline (default DefaultTestTimeout).
	TestTimeout time.Duration
	// BodySchema, if set, is the JSON Schema of input.body in package
	// turngate.tool_call (decoded JSON); nil leaves input.body an open
	// object. The gateway sets it when every agent declares a bodySchema.
	BodySchema any
	// StateSchema is the JSON Schema of input.state (policy/state's
	// Set.Schema): the declared state, so that reading an undeclared
	// name is a load error. Nil declares none: input.state has no keys.
	StateSchema map[string]any
	// Specialise selects specialised evaluation (specialise.go): on by
	// default; the TURNGATE_OPA_SPECIALISE environment variable overrides
	// it.
	Specialise Specialise
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o Options) testTimeout() time.Duration {
	if o.TestTimeout <= 0 {
		return DefaultTestTimeout
	}
	return o.TestTimeout
}

// Decision document paths. Modules declare these packages; the gateway
// queries them.
const (
	ToolCallPackage   = "turngate.tool_call"
	ToolResultPackage = "turngate.tool_result"
)

var (
	toolCallRef   = ast.MustParseRef("data." + ToolCallPackage)
	toolResultRef = ast.MustParseRef("data." + ToolResultPackage)
)

// Policy is a compiled, prepared set of Rego modules and data documents for
// one revision. It is immutable and safe for concurrent use.
type Policy struct {
	opts       Options
	toolCall   *rego.PreparedEvalQuery // nil when no module declares the package
	toolResult *rego.PreparedEvalQuery
	// toolCallSpec and toolResultSpec specialise the two queries; nil
	// when off or when the rule set cannot be specialised exactly.
	toolCallSpec, toolResultSpec *specialiser
	src                          sources
	schemas                      *schemaCache
	// rules maps each decision rule (data.turngate.tool_call.block, …) to
	// its definitions, in module order.
	rules map[string][]*ast.Location
	// definedAt is rules as file:line, for Trace.RulesFiredAt.
	definedAt policy.RuleLocations
	// shadows evaluates the shadow rules (shadow.go); nil without any.
	shadows *shadows
	// toolNames are the tool names the modules compare the called tool's
	// name with (toolnames.go).
	toolNames []policy.ToolName
	// stateReads lists by decision package the declared states its rules
	// read (StateReads).
	stateReads map[string][]string
}

// HasToolCall reports whether some module defines package
// turngate.tool_call. Without one, ToolCall fails with CodeUndefined;
// callers record "not evaluated" instead of calling it.
func (p *Policy) HasToolCall() bool { return p.toolCall != nil }

// HasToolResult reports whether some module defines package
// turngate.tool_result. Without one, ToolResult fails with CodeUndefined.
func (p *Policy) HasToolResult() bool { return p.toolResult != nil }

// Compile parses every module as Rego v1 and every data file, compiles them
// together with the sandbox's capabilities, and prepares the decision
// queries. All problems are returned at once (capped at policy.MaxErrors),
// each with a code, a file:line:col location and a snippet.
//
// Data files each hold one object that is merged at the root of data,
// whatever directory the file is in: a file {"tenants": {...}} is
// data.tenants. Compile parses a data file as JSON or YAML by its extension
// (.json, .yaml, .yml); which files are data is the caller's choice (in a
// rules directory, ruleset takes *.json, data.yaml and *.data.yaml, since
// other *.yaml files are CEL rules). Two files setting the same key (other
// than both to objects, which merge) is a CodeConflict error, as is a data
// key that collides with a rule.
func Compile(modules, data []policy.File, opts Options) (*Policy, policy.Errors) {
	return compile(modules, data, opts, true)
}

// compile is Compile; typed false skips the schema type checking, the
// baseline BenchmarkCompile measures its cost against.
func compile(modules, data []policy.File, opts Options, typed bool) (*Policy, policy.Errors) {
	mode, err := specialiseMode(opts)
	if err != nil {
		return nil, policy.Errors{{Code: policy.CodeCompile, Message: err.Error()}}
	}
	b := newBuild(opts)
	parsed := b.parseModules(modules, typed)
	doc := b.loadData(data)
	shadow := b.findShadows(parsed)
	if !b.compilable() {
		return nil, b.result()
	}
	c := b.compiler(doc, parsed)
	if c.Compile(withoutShadows(parsed, shadow)); c.Failed() {
		b.addCompileErrors(c.Errors)
	} else {
		b.checkDecisionTypes(c)
	}
	b.checkDecisionNames(parsed)
	b.checkUnusedPackages(parsed)
	b.checkStateGets(parsed, declaredStates(opts.StateSchema))
	if len(b.errs) > 0 {
		return nil, b.result()
	}
	p := &Policy{opts: opts, src: b.src, schemas: &schemaCache{}, rules: ruleLocations(c), toolNames: b.toolNames(parsed),
		stateReads: stateReadsOf(parsed, declaredStates(opts.StateSchema))}
	p.definedAt = definedAt(p.rules)
	store := newStore(doc)
	for _, q := range []struct {
		ref   ast.Ref
		dst   **rego.PreparedEvalQuery
		spec  **specialiser
		probe ast.Value
	}{
		{toolCallRef, &p.toolCall, &p.toolCallSpec, probeToolCallInput()},
		{toolResultRef, &p.toolResult, &p.toolResultSpec, probeToolResultInput()},
	} {
		if !declaresPackage(c, q.ref) {
			continue
		}
		pq, err := prepare(c, store, q.ref)
		if err != nil {
			b.errs = append(b.errs, &policy.Error{Code: policy.CodeCompile, Message: fmt.Sprintf("preparing %v: %v", q.ref, err)})
			return nil, b.result()
		}
		*q.dst = &pq
		*q.spec = newSpecialiser(c, doc, store, q.ref, specialisedUnknowns(q.probe), mode, opts, b.caps)
	}
	if p.shadows = b.prepareShadows(parsed, shadow, doc, store); len(b.errs) > 0 {
		return nil, b.result()
	}
	return p, nil
}

// ruleLocations maps every rule of the decision packages to its
// definitions, sorted by file and position.
func ruleLocations(c *ast.Compiler) map[string][]*ast.Location {
	locs := map[string][]*ast.Location{}
	for _, m := range c.Modules {
		if !m.Package.Path.Equal(toolCallRef) && !m.Package.Path.Equal(toolResultRef) {
			continue
		}
		for _, r := range m.Rules {
			name := m.Package.Path.String() + "." + r.Head.Ref()[0].String()
			locs[name] = append(locs[name], r.Location)
		}
	}
	for _, l := range locs {
		slices.SortFunc(l, func(x, y *ast.Location) int { return x.Compare(y) })
	}
	return locs
}

// definedAt renders each rule's definitions as "file:line", ", "-joined.
func definedAt(rules map[string][]*ast.Location) policy.RuleLocations {
	at := policy.RuleLocations{}
	for name, locs := range rules {
		lines := make([]string, len(locs))
		for i, l := range locs {
			lines[i] = fmt.Sprintf("%s:%d", l.File, l.Row)
		}
		at[name] = strings.Join(lines, ", ")
	}
	return at
}

func declaresPackage(c *ast.Compiler, ref ast.Ref) bool {
	for _, m := range c.Modules {
		if m.Package.Path.Equal(ref) {
			return true
		}
	}
	return false
}

func newStore(doc map[string]any) storage.Store {
	return inmem.NewFromObjectWithOpts(doc, inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
}

func prepare(c *ast.Compiler, store storage.Store, ref ast.Ref) (rego.PreparedEvalQuery, error) {
	return prepareQuery(c, store, ast.NewBody(ast.NewExpr(ast.NewTerm(ref))))
}

// prepareQuery prepares a decision query (or a residual of one) compiled
// in c.
func prepareQuery(c *ast.Compiler, store storage.Store, query ast.Body) (rego.PreparedEvalQuery, error) {
	r := rego.New(
		rego.ParsedQuery(query),
		rego.Compiler(c),
		rego.Store(store),
		rego.StoreReadAST(true),
		rego.StrictBuiltinErrors(true),
		rego.EnablePrintStatements(true),
		// Results stay ast.Values: the decision mapper reads them directly,
		// which skips a conversion to Go values on every evaluation.
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t.Value, nil }),
	)
	return r.PrepareForEval(context.Background())
}

// build accumulates the diagnostics and sources of one compilation.
type build struct {
	opts Options
	caps *ast.Capabilities
	src  sources
	errs policy.Errors
	// sandboxed holds the locations of calls already reported as sandbox
	// errors, so the compiler's "undefined function" for them is dropped.
	sandboxed map[location]bool
	// typed holds the policy modules (not tests), which are type-checked
	// against the input and data schemas.
	typed []*ast.Module
	// retired holds the locations of references to retired input names
	// already reported; like sandbox violations they do not stop
	// compilation, and the type checker's "undefined ref" for them is
	// dropped.
	retired map[location]bool
}

type location struct {
	file     string
	row, col int
}

func newBuild(opts Options) *build {
	return &build{opts: opts, caps: capabilities(opts), src: sources{}, sandboxed: map[location]bool{}, retired: map[location]bool{}}
}

// compilable reports whether every file parsed. Sandbox violations do not
// stop compilation, so their report comes with the compiler's.
func (b *build) compilable() bool {
	return len(b.errs) == len(b.sandboxed)+len(b.retired)
}

// compiler returns a compiler configured for the sandbox whose rules may not
// overlap the data document doc, and which type-checks the modules against
// the input and data schemas (see annotateSchemas).
func (b *build) compiler(doc map[string]any, modules map[string]*ast.Module) *ast.Compiler {
	return ast.NewCompiler().
		WithSchemas(b.typeSchemas(doc, modules)).
		WithUseTypeCheckAnnotations(true).
		WithCapabilities(b.caps).
		WithDefaultRegoVersion(ast.RegoV1).
		WithEnablePrintStatements(true).
		WithPathConflictsCheck(func(path []string) (bool, error) { return dataAt(doc, path), nil }).
		SetErrorLimit(policy.MaxErrors)
}

// parseModules parses files as Rego v1 modules keyed by path and reports
// parse errors and sandbox violations. Policy modules (not tests) are
// annotated with the input and data schemas they are checked against.
func (b *build) parseModules(files []policy.File, policyModules bool) map[string]*ast.Module {
	parsed := make(map[string]*ast.Module, len(files))
	popts := ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: b.caps, ProcessAnnotation: true}
	for _, f := range files {
		b.src.add(f)
		m, err := ast.ParseModuleWithOpts(f.Path, string(f.Data), popts)
		if err != nil {
			b.addCompileErrors(err)
			continue
		}
		b.checkSandbox(m)
		b.checkRetired(m)
		if policyModules {
			b.typed = append(b.typed, m)
		}
		parsed[f.Path] = m
	}
	return parsed
}

// checkSandbox reports every call of a builtin the sandbox forbids. The
// compiler would also refuse them (they are missing from the capabilities)
// but only as "undefined function"; this names the reason.
func (b *build) checkSandbox(m *ast.Module) {
	ast.WalkTerms(m, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
			if ref, ok := call[0].Value.(ast.Ref); ok {
				b.sandboxCall(ref, t.Location)
			}
		}
		return false
	})
	ast.WalkExprs(m, func(e *ast.Expr) bool {
		if e.IsCall() {
			b.sandboxCall(e.Operator(), e.Location)
		}
		return false
	})
}

func (b *build) sandboxCall(ref ast.Ref, loc *ast.Location) {
	why, forbidden := forbiddenBuiltins(b.opts)[ref.String()]
	if !forbidden || loc == nil {
		return
	}
	key := location{loc.File, loc.Row, loc.Col}
	if b.sandboxed[key] {
		return
	}
	b.sandboxed[key] = true
	b.errs = append(b.errs, b.src.error(policy.CodeSandbox, loc, fmt.Sprintf("%v is not allowed: %s", ref, why)))
}

// addCompileErrors converts OPA's parse or compile errors.
func (b *build) addCompileErrors(err error) {
	var errs ast.Errors
	var one *ast.Error
	switch {
	case errors.As(err, &errs):
	case errors.As(err, &one):
		errs = ast.Errors{one}
	default:
		b.errs = append(b.errs, &policy.Error{Code: policy.CodeCompile, Message: err.Error()})
		return
	}
	for _, e := range errs {
		if e.Location != nil && e.Code == ast.TypeErr && b.sandboxed[location{e.Location.File, e.Location.Row, e.Location.Col}] {
			continue
		}
		if pe, ok := b.refError(e); ok {
			if pe != nil {
				b.errs = append(b.errs, pe)
			}
			continue
		}
		code := policy.CodeCompile
		if e.Code == ast.ParseErr {
			code = policy.CodeParse
		}
		b.errs = append(b.errs, b.src.error(code, e.Location, e.Message))
	}
}

// result sorts the diagnostics by file and position and caps them.
func (b *build) result() policy.Errors {
	slices.SortStableFunc(b.errs, func(x, y *policy.Error) int {
		return cmp.Or(
			strings.Compare(x.Location.File, y.Location.File),
			cmp.Compare(x.Location.Line, y.Location.Line),
			cmp.Compare(x.Location.Column, y.Location.Column),
		)
	})
	if len(b.errs) > policy.MaxErrors {
		return b.errs[:policy.MaxErrors]
	}
	return b.errs
}

// sources keeps each file's lines for snippets.
type sources map[string][]string

func (s sources) add(f policy.File) {
	s[f.Path] = strings.Split(string(f.Data), "\n")
}

// error builds a positioned diagnostic with the source line under it.
func (s sources) error(code string, loc *ast.Location, msg string) *policy.Error {
	e := &policy.Error{Code: code, Message: msg}
	if loc == nil {
		return e
	}
	e.Location = policy.Location{File: loc.File, Line: loc.Row, Column: loc.Col}
	if lines := s[loc.File]; loc.Row >= 1 && loc.Row <= len(lines) {
		e.Snippet = policy.Snippet(strings.TrimRight(lines[loc.Row-1], "\r"), loc.Col)
	}
	return e
}
