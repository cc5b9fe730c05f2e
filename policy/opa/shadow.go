package opa

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// Shadow rules. A decision rule annotated
//
//	# METADATA
//	# title: no deletes on Fridays
//	# custom:
//	#   shadow: true
//	block contains "…" if { … }
//
// is evaluated on live traffic but never enforced. Compile builds two
// policies per decision package that has shadow rules: the enforced one
// (shadow rules removed), which decides, and the full one (every rule
// enforced), whose decision is the would-be decision of a Trace's Shadow.
// The full policy also holds a renamed copy of each shadow rule, a helper
// rule of its own (shadowMember), so one evaluation says which shadow rules
// fired. A package without shadow rules evaluates once, as before.

// shadowKey is the custom annotation key that marks a shadow rule.
const shadowKey = "shadow"

// shadowMember is the prefix of the helper rules that copy shadow rules in
// the full policy; a decision package's own rule may not use it.
const shadowMember = "__turngate_shadow_"

// decisionRules lists each decision package's rules, the only rules that
// may be shadow.
var decisionRules = map[string][]string{
	ToolCallPackage:   {ruleBlock, ruleSubstitute, ruleApproval, rulePatch},
	ToolResultPackage: {rulePatch, ruleRedact},
}

// shadowRule is one rule marked shadow.
type shadowRule struct {
	// id names the rule in records and metrics: "FILE#TITLE", or
	// "FILE#RULE@LINE" when the annotation has no title.
	id string
	// effect is the decision rule it adds to (block, substitute, approval,
	// patch, redact).
	effect string
	// member is its helper rule's name in the full policy's document.
	member *ast.Term
}

// shadowPolicy is the full policy of one decision package.
type shadowPolicy struct {
	query *rego.PreparedEvalQuery
	rules []shadowRule
}

// shadows are a Policy's full policies, nil for a package without shadow
// rules, and the rule locations of the full policy (for located errors).
type shadows struct {
	toolCall, toolResult *shadowPolicy
	at                   *Policy
}

// shadowDef is a shadow rule found at compile time and its id.
type shadowDef struct {
	rule *ast.Rule
	id   string
}

// findShadows returns the shadow rules of parsed by module path and
// reports misplaced or malformed shadow annotations, and decision-package
// rules that use the helper rules' reserved names.
func (b *build) findShadows(parsed map[string]*ast.Module) map[string][]shadowDef {
	found := map[string][]shadowDef{}
	ids := map[string]*ast.Location{}
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		pkg := packageName(m)
		if _, decision := decisionRules[pkg]; decision {
			for _, r := range m.Rules {
				if name := r.Head.Ref()[0].String(); strings.HasPrefix(name, shadowMember) {
					b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location, fmt.Sprintf("rule names starting with %s are reserved for shadow rules", shadowMember)))
				}
			}
		}
		for _, a := range m.Annotations {
			v, ok := a.Custom[shadowKey]
			if !ok {
				continue
			}
			on, ok := v.(bool)
			switch {
			case !ok:
				b.errs = append(b.errs, b.src.error(policy.CodeSchema, a.Location, fmt.Sprintf("custom.shadow is %v, want true or false", v)))
				continue
			case a.Scope != "rule":
				b.errs = append(b.errs, b.src.error(policy.CodeSchema, a.Location, fmt.Sprintf("custom.shadow marks one rule: it needs scope rule, not %s", a.Scope)))
				continue
			case !on:
				continue
			}
			r := annotatedRule(m, a)
			if r == nil {
				continue // a rule-scope annotation always precedes its rule
			}
			name := r.Head.Ref()[0].String()
			switch {
			case !isDecisionRule(pkg, name):
				b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location, fmt.Sprintf(
					"%s.%s cannot be shadow: only the decision rules of %s (%v) and %s (%v) can",
					pkg, name, ToolCallPackage, decisionRules[ToolCallPackage], ToolResultPackage, decisionRules[ToolResultPackage])))
				continue
			case r.Default:
				b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location, "a default rule cannot be shadow: it would always fire"))
				continue
			}
			id := path + "#" + name + "@" + strconv.Itoa(r.Location.Row)
			if a.Title != "" {
				id = path + "#" + a.Title
			}
			if prev, dup := ids[id]; dup {
				b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location, fmt.Sprintf("shadow rule %q is already defined at line %d: give it another title", id, prev.Row)))
				continue
			}
			ids[id] = r.Location
			found[path] = append(found[path], shadowDef{rule: r, id: id})
		}
	}
	return found
}

// packageName is a module's package without "data.", e.g.
// "turngate.tool_call".
func packageName(m *ast.Module) string {
	return m.Package.Path[1:].String()
}

func isDecisionRule(pkg, name string) bool {
	return slices.Contains(decisionRules[pkg], name)
}

// annotatedRule returns the rule of m that the rule-scope annotation a is
// attached to. The parser gives each rule its own copies of its
// annotations, so they are matched by position; the schema annotations
// added for type checking share their rule's location.
func annotatedRule(m *ast.Module, a *ast.Annotations) *ast.Rule {
	if a.Scope != "rule" || a.Location == nil {
		return nil
	}
	for _, r := range m.Rules {
		if a.Location == r.Location {
			return r
		}
		for _, ra := range r.Annotations {
			if ra.Location != nil && ra.Location.Row == a.Location.Row && ra.Location.Col == a.Location.Col {
				return r
			}
		}
	}
	return nil
}

// withoutShadows returns parsed with the shadow rules (and their
// annotations) removed: the enforced policy's modules.
func withoutShadows(parsed map[string]*ast.Module, shadow map[string][]shadowDef) map[string]*ast.Module {
	if len(shadow) == 0 {
		return parsed
	}
	return rewriteModules(parsed, shadow, func(m *ast.Module, defs []shadowDef) {
		// Annotations first: annotatedRule looks their rules up in m.Rules.
		m.Annotations = slices.DeleteFunc(slices.Clone(m.Annotations), func(a *ast.Annotations) bool {
			r := annotatedRule(m, a)
			return r != nil && containsRule(defs, r)
		})
		m.Rules = slices.DeleteFunc(slices.Clone(m.Rules), func(r *ast.Rule) bool { return containsRule(defs, r) })
	})
}

// rewriteModules returns parsed with each module that has shadow rules
// replaced by a shallow copy that edit changes; the other modules are
// shared, and the compiler copies what it compiles. Modules are visited
// in path order.
func rewriteModules(parsed map[string]*ast.Module, shadow map[string][]shadowDef, edit func(m *ast.Module, defs []shadowDef)) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(parsed))
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		if defs := shadow[path]; len(defs) > 0 {
			cp := *m
			edit(&cp, defs)
			m = &cp
		}
		out[path] = m
	}
	return out
}

// atShadowRule reports whether loc is where a shadow rule is defined.
func atShadowRule(shadow map[string][]shadowDef, loc policy.Location) bool {
	return slices.ContainsFunc(shadow[loc.File], func(d shadowDef) bool {
		return d.rule.Location.Row == loc.Line && d.rule.Location.Col == loc.Column
	})
}

func containsRule(defs []shadowDef, r *ast.Rule) bool {
	return slices.ContainsFunc(defs, func(d shadowDef) bool { return d.rule == r })
}

// prepareShadows compiles and prepares the full policy of each decision
// package that has shadow rules: every rule, plus each shadow rule copied
// under a helper name. It returns nil when there are no shadow rules.
// Errors (a shadow rule that does not compile) are added to b.errs.
func (b *build) prepareShadows(parsed map[string]*ast.Module, shadow map[string][]shadowDef, doc map[string]any, store storage.Store) *shadows {
	if len(shadow) == 0 {
		return nil
	}
	byPkg := map[string][]shadowRule{}
	n := 0 // helper rules so far
	full := rewriteModules(parsed, shadow, func(m *ast.Module, defs []shadowDef) {
		m.Rules = slices.Clone(m.Rules)
		pkg := packageName(m)
		for _, d := range defs {
			name := shadowMember + strconv.Itoa(n)
			n++
			m.Rules = append(m.Rules, renamedRule(d.rule, name))
			byPkg[pkg] = append(byPkg[pkg], shadowRule{id: d.id, effect: d.rule.Head.Ref()[0].String(), member: ast.StringTerm(name)})
		}
	})
	// The modules already carry their schema annotations, and their data
	// references were checked, when the enforced policy's compiler was
	// made: doing it again would repeat both.
	b.typed = nil
	c := b.compiler(doc, full)
	if c.Compile(full); c.Failed() {
		b.addCompileErrors(c.Errors)
		return nil
	}
	// The enforced compile checked the other rules' decision types.
	checked := len(b.errs)
	b.checkDecisionTypes(c)
	b.errs = append(b.errs[:checked], slices.DeleteFunc(b.errs[checked:], func(e *policy.Error) bool {
		return !atShadowRule(shadow, e.Location)
	})...)
	if len(b.errs) > 0 {
		return nil
	}
	s := &shadows{at: &Policy{src: b.src, rules: ruleLocations(c)}}
	for _, q := range []struct {
		pkg string
		ref ast.Ref
		dst **shadowPolicy
	}{{ToolCallPackage, toolCallRef, &s.toolCall}, {ToolResultPackage, toolResultRef, &s.toolResult}} {
		if len(byPkg[q.pkg]) == 0 {
			continue
		}
		pq, err := prepare(c, store, q.ref)
		if err != nil {
			b.errs = append(b.errs, &policy.Error{Code: policy.CodeCompile, Message: fmt.Sprintf("preparing the shadow rules of %v: %v", q.ref, err)})
			return nil
		}
		*q.dst = &shadowPolicy{query: &pq, rules: byPkg[q.pkg]}
	}
	return s
}

// renamedRule copies r (and its else chain) under the helper name, without
// its annotations.
func renamedRule(r *ast.Rule, name string) *ast.Rule {
	cp := r.Copy()
	cp.Annotations = nil
	for x := cp; x != nil; x = x.Else {
		ref := x.Head.Ref().Copy()
		ref[0] = ast.VarTerm(name)
		x.Head.SetRef(ref)
		x.Head.Name = ast.Var(name)
		if len(ref) > 1 {
			x.Head.Name = ""
		}
	}
	return cp
}

// fired returns the shadow rules whose helper rule holds a value in doc
// (a non-empty set, or any value of a complete rule), and their effects.
func (sp *shadowPolicy) fired(doc ast.Value) ([]string, map[string]string) {
	obj, ok := doc.(ast.Object)
	if !ok {
		return nil, nil
	}
	var ids []string
	var effects map[string]string
	for _, r := range sp.rules {
		t := obj.Get(r.member)
		if t == nil {
			continue
		}
		if set, ok := t.Value.(ast.Set); ok && set.Len() == 0 {
			continue
		}
		if effects == nil {
			effects = map[string]string{}
		}
		if _, seen := effects[r.id]; !seen {
			ids = append(ids, r.id)
		}
		effects[r.id] = r.effect
	}
	return ids, effects
}

// evalShadow evaluates a package's full policy on the same input as the
// enforced one and returns the shadow outcome: the shadow rules that
// fired, the would-be decision (decide applied to the full document) and
// whether it differs from enforced. A failure is the outcome's Error; it
// never changes the enforced decision.
func evalShadow[D any](ctx context.Context, p *Policy, sp *shadowPolicy, pkg string, in ast.Value,
	enforced *D, decide func(ast.Value) (*D, []string, error)) *policy.Shadow {
	doc, _, err := p.eval(ctx, sp.query, nil, pkg, in)
	if err != nil {
		return &policy.Shadow{Error: err.Error()}
	}
	s := &policy.Shadow{}
	s.RulesFired, s.Effects = sp.fired(doc)
	d, _, err := decide(doc)
	if err != nil {
		s.Error = p.shadows.at.locate(err).Error()
		return s
	}
	if d != nil {
		s.Decision = d
	}
	s.Changed = !reflect.DeepEqual(d, enforced)
	return s
}

// shadowToolCall is ToolCall's shadow outcome, nil without shadow rules.
func (p *Policy) shadowToolCall(ctx context.Context, in ast.Value, tc *engine.ToolCallContext, enforced *engine.ToolCallDecision) *policy.Shadow {
	if p.shadows == nil || p.shadows.toolCall == nil {
		return nil
	}
	return evalShadow(ctx, p, p.shadows.toolCall, ToolCallPackage, in, enforced,
		func(doc ast.Value) (*engine.ToolCallDecision, []string, error) { return decideToolCall(doc, tc.Input) })
}

// shadowToolResult is ToolResult's shadow outcome, nil without shadow
// rules.
func (p *Policy) shadowToolResult(ctx context.Context, in ast.Value, rc *engine.ToolCallResultContext, enforced *engine.ToolResultDecision) *policy.Shadow {
	if p.shadows == nil || p.shadows.toolResult == nil {
		return nil
	}
	return evalShadow(ctx, p, p.shadows.toolResult, ToolResultPackage, in, enforced,
		func(doc ast.Value) (*engine.ToolResultDecision, []string, error) {
			return decideToolResult(doc, rc.Output)
		})
}
