package opa

import (
	"container/list"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/turngate/turngate/engine"
)

// Specialised evaluation. Most of a decision's work depends on the called
// tool and the caller's tenant only: catalogue and grant lookups, limits,
// which rules apply at all. For each (input.tool.name,
// input.principal.tenant) a decision package is partially evaluated with
// every other input field unknown, and the residual (the rules with what
// the key decides folded in) is prepared as a query of its own. Residuals
// are cached per Policy (a revision) in a bounded LRU.
//
// The residual is an optimisation, never a second semantics:
//   - A rule set is specialised only if that cannot change what a decision
//     fails with (specialisable): no print(), no `with`, no `else`, only
//     single-name rules in the decision package, and no rule body where an
//     expression the key decides follows one that may fail at run time
//     (partial evaluation would drop the body, and the failure with it).
//   - The residual query evaluates every rule of the package, as the
//     generic query does; when it fails or is undefined, the generic query
//     is evaluated and its answer (an error with its position) returned.
//   - Partial evaluation runs under the evaluation deadline; when it fails
//     or times out the key uses the generic query.
//   - Non-deterministic builtins (time.now_ns, rand.intn, uuid.rfc4122…)
//     are not folded: OPA saves them into the residual, evaluated per call.
//   - The unknowns are derived from the input builders (specialisedUnknowns),
//     so a field added to the input cannot silently read as absent.

// Specialise selects how a Policy uses specialised evaluation.
type Specialise int

const (
	// SpecialiseOn (the default) builds a key's residual in the background
	// on its first call, which the generic query answers.
	SpecialiseOn Specialise = iota
	// SpecialiseOff evaluates every call with the generic query.
	SpecialiseOff
	// SpecialiseForce builds a missing residual on the call itself (under
	// its own deadline) and uses it for every call of a specialisable rule
	// set: the mode tests run in to compare the two paths.
	SpecialiseForce
)

// SpecialiseEnv, when set to "force" or "off", overrides
// Options.Specialise for every Policy compiled in the process. CI runs the
// policy and rule set suites with TURNGATE_OPA_SPECIALISE=force.
const SpecialiseEnv = "TURNGATE_OPA_SPECIALISE"

// MaxSpecialisedKeys bounds a Policy's residual cache per decision package:
// a residual costs about 370 KiB and 30-40 ms to build.
const MaxSpecialisedKeys = 64

// specialiseMode resolves the mode: the environment's override, else opts.
func specialiseMode(opts Options) (Specialise, error) {
	switch v := os.Getenv(SpecialiseEnv); v {
	case "":
		return opts.Specialise, nil
	case "force":
		return SpecialiseForce, nil
	case "off":
		return SpecialiseOff, nil
	default:
		return 0, fmt.Errorf("%s=%q: want force, off or unset", SpecialiseEnv, v)
	}
}

// SpecialisedStats counts specialised evaluation in this process, over
// every Policy: the gateway exports them as metrics.
type SpecialisedStats struct {
	// Hits are evaluations a residual answered.
	Hits uint64
	// Misses are evaluations of a key without a residual yet (the generic
	// query answered; a build may have started).
	Misses uint64
	// Fallbacks are evaluations the generic query answered because the
	// key's residual failed or was undefined, or the key cannot be
	// specialised (its partial evaluation failed).
	Fallbacks uint64
}

var specStats struct{ hits, misses, fallbacks atomic.Uint64 }

// Specialised returns the process's specialised evaluation counters.
func Specialised() SpecialisedStats {
	return SpecialisedStats{Hits: specStats.hits.Load(), Misses: specStats.misses.Load(), Fallbacks: specStats.fallbacks.Load()}
}

// specKey is a residual's key.
type specKey struct{ tool, tenant string }

// residual is one key's prepared residual query; nil query: the key is
// evaluated generically.
type residual struct {
	query *rego.PreparedEvalQuery
	elem  *list.Element
}

// specialiser holds one decision package's residuals.
type specialiser struct {
	pkg     string
	partial rego.PreparedPartialQuery
	// outs are the residual query's result variables, one per rule of the
	// package; decision says which the decision document holds and
	// single which are complete rules (a set of at most one value).
	outs     []ruleOut
	unknowns []*ast.Term
	modules  map[string]*ast.Module
	caps     *ast.Capabilities
	store    storage.Store
	timeout  time.Duration
	force    bool
	// building admits one background build at a time.
	building chan struct{}
	// partialMu serialises partial evaluations (see newSpecialiser).
	partialMu sync.Mutex

	mu    sync.Mutex
	cache map[specKey]*residual
	lru   list.List // of specKey, most recent first
}

type ruleOut struct {
	name     *ast.Term
	v        string
	decision bool
	single   bool
}

// newSpecialiser returns the specialiser of the package at ref compiled in
// c, or nil when the rule set cannot be specialised exactly.
func newSpecialiser(c *ast.Compiler, doc map[string]any, store storage.Store, ref ast.Ref, unknowns []*ast.Term, mode Specialise, opts Options, caps *ast.Capabilities) *specialiser {
	if mode == SpecialiseOff {
		return nil
	}
	pkg := ref[1:].String()
	outs, noInline, ok := specialisable(c, ref, unknowns)
	if !ok {
		return nil
	}
	body := make(ast.Body, 0, len(outs))
	for _, o := range outs {
		rule := ast.NewTerm(append(ref.Copy(), o.name))
		var val *ast.Term
		if o.single {
			// A complete rule may be undefined; the set of its values
			// never is.
			x := ast.VarTerm("__turngate_x")
			val = ast.SetComprehensionTerm(x, ast.NewBody(ast.Equality.Expr(x, rule)))
		} else {
			val = rule
		}
		body = append(body, ast.Equality.Expr(ast.VarTerm(o.v), val))
	}
	// Partial evaluation writes into the terms it reads (copy
	// propagation), so it runs on a compiler and a store of its own, one
	// build at a time, and residuals get copies.
	pc := ast.NewCompiler().WithCapabilities(caps).WithDefaultRegoVersion(ast.RegoV1)
	if pc.Compile(copyModules(c.Modules, 0)); pc.Failed() {
		return nil
	}
	r := rego.New(
		rego.ParsedQuery(body),
		rego.Compiler(pc),
		rego.Store(newStore(doc)),
		rego.StoreReadAST(true),
		rego.StrictBuiltinErrors(true),
		rego.ParsedUnknowns(unknowns),
		rego.DisableInlining(noInline),
		rego.PartialNamespace("__turngate_residual"),
	)
	pp, err := r.PrepareForPartial(context.Background())
	if err != nil {
		return nil
	}
	return &specialiser{pkg: pkg, partial: pp, outs: outs, unknowns: unknowns, modules: c.Modules, caps: caps, store: store,
		timeout: opts.timeout(), force: mode == SpecialiseForce, building: make(chan struct{}, 1), cache: map[specKey]*residual{}}
}

// query returns key's residual, nil when the generic query is to answer
// (counted as a miss or a fallback). In force mode a missing residual is
// built now; otherwise in the background.
func (s *specialiser) query(ctx context.Context, key specKey) *rego.PreparedEvalQuery {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	r, ok := s.cache[key]
	if ok {
		s.lru.MoveToFront(r.elem)
	}
	s.mu.Unlock()
	switch {
	case ok && r.query != nil:
		return r.query
	case ok:
		specStats.fallbacks.Add(1)
		return nil
	case s.force:
		if q := s.build(ctx, key); q != nil {
			return q
		}
		specStats.fallbacks.Add(1)
		return nil
	}
	specStats.misses.Add(1)
	select {
	case s.building <- struct{}{}:
		go func() {
			defer func() { <-s.building }()
			s.build(context.Background(), key)
		}()
	default: // a build is under way; a later call of the key starts one
	}
	return nil
}

// build partially evaluates the package for key under the evaluation
// deadline, prepares the residual and caches it (or that the key has
// none). A cancelled caller caches nothing.
func (s *specialiser) build(ctx context.Context, key specKey) *rego.PreparedEvalQuery {
	stopper := topdown.NewCancel()
	deadline := time.AfterFunc(s.timeout, stopper.Cancel)
	defer deadline.Stop()
	if ctx.Done() != nil {
		defer context.AfterFunc(ctx, stopper.Cancel)()
	}
	known := ast.NewObject(
		ast.Item(inputKey.tool, ast.ObjectTerm(ast.Item(inputKey.name, ast.StringTerm(key.tool)))),
		ast.Item(inputKey.principal, ast.ObjectTerm(ast.Item(inputKey.tenant, ast.StringTerm(key.tenant)))),
	)
	q, err := s.prepareResidual(ctx, known, stopper)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		q = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.cache[key]; ok {
		return r.query
	}
	s.cache[key] = &residual{query: q, elem: s.lru.PushFront(key)}
	if s.lru.Len() > MaxSpecialisedKeys {
		delete(s.cache, s.lru.Remove(s.lru.Back()).(specKey))
	}
	return q
}

func (s *specialiser) prepareResidual(ctx context.Context, known ast.Value, stopper topdown.Cancel) (*rego.PreparedEvalQuery, error) {
	s.partialMu.Lock()
	pq, err := s.partial.Partial(ctx, rego.EvalParsedInput(known), rego.EvalExternalCancel(stopper), noMetrics)
	var query ast.Body
	var modules map[string]*ast.Module
	if err == nil && len(pq.Queries) == 1 {
		modules = copyModules(s.modules, len(pq.Support))
		query = pq.Queries[0].Copy()
		support := make([]*ast.Module, len(pq.Support))
		for i, m := range pq.Support {
			support[i] = m.Copy()
			modules[fmt.Sprintf("__turngate_residual_%d.rego", i)] = support[i]
		}
		if shared := shareWalks(support); shared != nil {
			modules["__turngate_shared.rego"] = shared
		}
	}
	s.partialMu.Unlock()
	if err != nil {
		return nil, err
	}
	if query == nil {
		// None: some rule is undefined for the key (the generic query
		// fails the same way); several cannot happen for equalities.
		return nil, fmt.Errorf("%d residual queries", len(pq.Queries))
	}
	c := ast.NewCompiler().WithCapabilities(s.caps).WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(modules); c.Failed() {
		return nil, c.Errors
	}
	q, err := prepareQuery(c, s.store, query)
	if err != nil {
		return nil, err
	}
	return &q, nil
}

// sharedWalks is the package of the string walks residuals share.
var sharedWalks = ast.MustParseRef("data.__turngate_shared")

// shareWalks rewrites every `walk(input.…, [p, v]); is_string(v)` of the
// residual's rules, which rule sets repeat per rule (one regex each), to a
// lookup in one partial set of the [path, string] pairs of that walk,
// which an evaluation computes once: the same pairs, so the same
// solutions, and neither call can fail. It returns the module of the sets,
// nil when nothing was rewritten.
func shareWalks(support []*ast.Module) *ast.Module {
	sets := map[string]*ast.Term{}
	src := "package __turngate_shared\n"
	for _, m := range support {
		for _, r := range m.Rules {
			for i := 0; i+1 < len(r.Body); i++ {
				e, next := r.Body[i], r.Body[i+1]
				if e.Negated || next.Negated || !e.IsCall() || !next.IsCall() || len(e.With)+len(next.With) > 0 ||
					!e.Operator().Equal(ast.WalkBuiltin.Ref()) || !next.Operator().Equal(ast.IsString.Ref()) || len(e.Operands()) != 2 {
					continue
				}
				root, ok := e.Operand(0).Value.(ast.Ref)
				pair, isArr := e.Operand(1).Value.(*ast.Array)
				if !ok || !root.HasPrefix(ast.InputRootRef) || !root.IsGround() || !isArr || pair.Len() != 2 ||
					!pair.Elem(1).Equal(next.Operand(0)) {
					continue
				}
				if _, ok := pair.Elem(1).Value.(ast.Var); !ok {
					continue
				}
				set, ok := sets[root.String()]
				if !ok {
					set = ast.VarTerm(fmt.Sprintf("strings%d", len(sets)))
					sets[root.String()] = set
					src += fmt.Sprintf("%v contains [p, v] if { walk(%v, [p, v]); is_string(v) }\n", set, root)
				}
				// The whole set, a ground ref, is evaluated once per
				// evaluation (OPA caches it); a lookup with a variable
				// key would evaluate the set's rule again.
				w := freshVar(r, fmt.Sprintf("__turngate_w%d", i))
				whole := ast.Equality.Expr(w, ast.NewTerm(append(sharedWalks.Copy(), set)))
				lookup := ast.NewExpr(ast.NewTerm(ast.Ref{w, ast.ArrayTerm(pair.Elem(0), pair.Elem(1))}))
				whole.Location, lookup.Location = e.Location, e.Location
				r.Body = append(append(r.Body[:i:i], whole, lookup), r.Body[i+2:]...)
				for j := range r.Body {
					r.Body[j].Index = j
				}
			}
		}
	}
	if len(sets) == 0 {
		return nil
	}
	m, err := ast.ParseModuleWithOpts("__turngate_shared.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil // unreachable: the source is built from refs and names
	}
	return m
}

// freshVar is a variable named base, or base with a suffix, that rule r
// does not use: a rule's own variable of that name is never captured.
func freshVar(r *ast.Rule, base string) *ast.Term {
	used := map[ast.Var]bool{}
	ast.WalkVars(r, func(v ast.Var) bool { used[v] = true; return false })
	name := ast.Var(base)
	for n := 0; used[name]; n++ {
		name = ast.Var(fmt.Sprintf("%s_%d", base, n))
	}
	return ast.VarTerm(string(name))
}

// copyModules deep-copies modules, with room for extra more.
func copyModules(modules map[string]*ast.Module, extra int) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(modules)+extra)
	for name, m := range modules {
		out[name] = m.Copy()
	}
	return out
}

// document assembles the decision document from a residual's result: the
// decision rules' values; a complete rule without a value is absent.
func (s *specialiser) document(rs rego.ResultSet) (ast.Value, bool) {
	if len(rs) != 1 {
		return nil, false
	}
	doc := ast.NewObject()
	for _, o := range s.outs {
		v, ok := rs[0].Bindings[o.v].(ast.Value)
		if !ok {
			return nil, false
		}
		if !o.decision {
			continue
		}
		if o.single {
			set, ok := v.(ast.Set)
			if !ok || set.Len() > 1 {
				return nil, false
			}
			if set.Len() == 0 {
				continue
			}
			v = set.Slice()[0].Value
		}
		doc.Insert(o.name, ast.NewTerm(v))
	}
	return doc, true
}

// keyOf reads the specialisation key from an input document.
func keyOf(in ast.Value) specKey {
	obj, _ := in.(ast.Object)
	str := func(outer, inner *ast.Term) string {
		if obj == nil {
			return ""
		}
		o := obj.Get(outer)
		if o == nil {
			return ""
		}
		oo, _ := o.Value.(ast.Object)
		if oo == nil {
			return ""
		}
		if t := oo.Get(inner); t != nil {
			if s, ok := t.Value.(ast.String); ok {
				return string(s)
			}
		}
		return ""
	}
	return specKey{tool: str(inputKey.tool, inputKey.name), tenant: str(inputKey.principal, inputKey.tenant)}
}

// probeToolCallInput and probeToolResultInput are input documents with
// every field the builders can set, for specialisedUnknowns.
func probeToolCallInput() ast.Value {
	v, _ := toolCallInput(&engine.ToolCallContext{State: map[string]any{}}, nil, nil)
	return v
}

func probeToolResultInput() ast.Value {
	v, _ := toolResultInput(&engine.ToolCallResultContext{State: map[string]any{}}, nil, nil)
	return v
}

// specialisedKnown are the input paths a residual is specialised on.
var specialisedKnown = []ast.Ref{
	ast.MustParseRef("input.tool.name"),
	ast.MustParseRef("input.principal.tenant"),
}

// specialisedUnknowns lists the refs of every field of the input document
// in except the known ones: the shallowest paths that hold no known path.
// in is an input document built by the package's builder, so every field
// a rule can read is covered.
func specialisedUnknowns(in ast.Value) []*ast.Term {
	var out []*ast.Term
	var walk func(prefix ast.Ref, v ast.Value)
	walk = func(prefix ast.Ref, v ast.Value) {
		obj, _ := v.(ast.Object)
		if obj == nil {
			out = append(out, ast.NewTerm(prefix))
			return
		}
		for _, k := range obj.Keys() {
			path := append(prefix.Copy(), k)
			switch {
			case slices.ContainsFunc(specialisedKnown, func(r ast.Ref) bool { return r.Equal(path) }):
			case slices.ContainsFunc(specialisedKnown, func(r ast.Ref) bool { return r.HasPrefix(path) }):
				walk(path, obj.Get(k).Value)
			default:
				out = append(out, ast.NewTerm(path))
			}
		}
	}
	walk(ast.InputRootRef, in)
	return out
}

// eval evaluates the residual q (from query, nil: none) for in under the
// stopper of the call's deadline; ok false means the generic query must
// answer.
func (s *specialiser) eval(ctx context.Context, q *rego.PreparedEvalQuery, in ast.Value, stopper topdown.Cancel) (ast.Value, bool) {
	if q == nil {
		return nil, false
	}
	rs, err := q.Eval(ctx, rego.EvalParsedInput(in), rego.EvalExternalCancel(stopper), noMetrics)
	if err == nil {
		if doc, ok := s.document(rs); ok {
			specStats.hits.Add(1)
			return doc, true
		}
	}
	specStats.fallbacks.Add(1)
	return nil, false
}
