package opa

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
)

// Rule-name mistakes that would otherwise load and never fire. The gateway
// reads only the decision rules of the two decision packages: a rule
// `blocks contains …` in package turngate.tool_call is a helper nobody
// reads, and a module `package turngate.toolcall` is evaluated by no one.
// Both load without a word from OPA, and both silently allow what the
// author meant to block, so both are load errors.

// turngateRef is the root of the packages turngate owns.
var turngateRef = ast.MustParseRef("data.turngate")

// checkDecisionNames reports each rule of a decision package that no rule
// reads (readNames) and that was meant to decide: one named as the other
// package's decision (block in turngate.tool_result), close to one of its
// own (blocks, substitue, aproval, redacts) or as other OPA integrations
// decide (deny, violation, allow, warn), with what decides here. A rule
// that some rule reads is a helper, whatever its name (blocked, read by
// block contains … if blocked).
func (b *build) checkDecisionNames(parsed map[string]*ast.Module) {
	read := readNames(parsed)
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		pkg := packageName(m)
		own, decision := decisionRules[pkg]
		if !decision {
			continue
		}
		reported := map[string]bool{}
		for _, r := range m.Rules {
			name := r.Head.Ref()[0].String()
			full := m.Package.Path.String() + "." + name
			if slices.Contains(own, name) || strings.HasPrefix(name, shadowMember) || reported[full] || anyReadUnder(read, full) {
				continue
			}
			why := ""
			for other, rules := range decisionRules {
				if other != pkg && slices.Contains(rules, name) {
					why = fmt.Sprintf("%s is a decision of %s, not of %s, and no rule reads it here", name, other, pkg)
				}
			}
			if hint, conventional := opaConventions[name]; why == "" && conventional {
				why = fmt.Sprintf("%s is not a decision of %s and no rule reads it, so it never decides anything: %s", name, pkg, hint)
			}
			if why == "" {
				meant := suggest.Closest(name, own)
				if meant == "" {
					continue // a helper rule nobody reads: dead, but not meant to decide
				}
				why = fmt.Sprintf("%s is not a decision of %s and no rule reads it; did you mean %s?", name, pkg, meant)
			}
			reported[full] = true
			b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location,
				fmt.Sprintf("%s (its decisions are %s)", why, strings.Join(own, ", "))))
		}
	}
}

// opaConventions are the rule names other OPA integrations decide by
// (OPA's own examples, Gatekeeper, Conftest), with what says it here. In
// a decision package they are helpers like any other, so one that no rule
// reads is a policy that was meant to decide and never does.
var opaConventions = map[string]string{
	"deny":      "write block contains reason if … instead",
	"violation": "write block contains reason if … instead",
	"allow":     "a call is allowed unless a decision fires: write block contains reason if not allow",
	"warn":      "nothing here only warns: a decision rule marked shadow (its METADATA custom: shadow: true) is recorded, not enforced",
}

// readNames returns what the rules of parsed read, as absolute
// references ("data.turngate.tool_call.blocked"): a bare name in a rule's
// body, value or key is read from the rule's own package, a data.…
// reference from where it says. A rule's own head is not a read of it.
func readNames(parsed map[string]*ast.Module) map[string]bool {
	read := map[string]bool{}
	for _, m := range parsed {
		pkg := m.Package.Path.String()
		visit := func(t *ast.Term) bool {
			switch v := t.Value.(type) {
			case ast.Var:
				read[pkg+"."+string(v)] = true
			case ast.Ref:
				if v.HasPrefix(ast.DefaultRootRef) {
					read[v.ConstantPrefix().String()] = true
				}
			}
			return false
		}
		for _, r := range m.Rules {
			for ; r != nil; r = r.Else {
				ast.WalkTerms(r.Body, visit)
				for _, t := range append([]*ast.Term{r.Head.Value, r.Head.Key}, r.Head.Args...) {
					if t != nil {
						ast.WalkTerms(t, visit)
					}
				}
			}
		}
	}
	return read
}

// anyReadUnder reports whether read holds ref or a reference inside it
// (data.turngate.tool_call.allow[x] for data.turngate.tool_call.allow).
func anyReadUnder(read map[string]bool, ref string) bool {
	for r := range read {
		if r == ref || strings.HasPrefix(r, ref+".") || strings.HasPrefix(r, ref+"[") {
			return true
		}
	}
	return false
}

// checkUnusedPackages reports each module of a package under turngate that
// is neither a decision package nor used, directly or through other such
// modules, by a decision package's modules: nothing would ever evaluate
// its rules. An unused module outside turngate's packages is reported
// only when it looks like a misnamed decision package (meantPackage,
// decisionLike): a typo in "turngate." must not switch the check off.
func (b *build) checkUnusedPackages(parsed map[string]*ast.Module) {
	used := map[string]bool{} // module paths reached from a decision package
	var reach []*ast.Module
	for path, m := range parsed {
		if _, decision := decisionRules[packageName(m)]; decision {
			used[path] = true
			reach = append(reach, m)
		}
	}
	for len(reach) > 0 {
		m := reach[len(reach)-1]
		reach = reach[:len(reach)-1]
		for _, ref := range dataRefs(m) {
			for path, other := range parsed {
				if !used[path] && overlaps(ref, other.Package.Path) {
					used[path] = true
					reach = append(reach, other)
				}
			}
		}
	}
	decisions := slices.Sorted(maps.Keys(decisionRules))
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		if used[path] {
			continue
		}
		pkg := packageName(m)
		meant := meantPackage(pkg, decisions)
		rule := ""
		if !m.Package.Path.HasPrefix(turngateRef) {
			// Outside turngate's packages an unused module is a library of
			// the user's own, unless it looks like a decision package put
			// under the wrong name: named like one (turngat.tool_call,
			// tool_call) or holding a decision's rule.
			if rule = decisionLike(m); meant == "" && rule == "" {
				continue
			}
		}
		msg := fmt.Sprintf("package %s is not a decision package (%s) and no decision package uses it, so its rules are never evaluated",
			pkg, strings.Join(decisions, ", "))
		if rule != "" {
			msg += fmt.Sprintf(", its %s rule among them", rule)
		}
		if meant != "" {
			msg += fmt.Sprintf("; did you mean %s?", meant)
		}
		b.errs = append(b.errs, b.src.error(policy.CodeSchema, m.Package.Location, msg))
	}
}

// meantPackage returns the decision package pkg is a misspelling of: the
// whole name close to one (turngate.toolcall, turngat.tool_call,
// Turngate.tool_call), or its last part close to one's (tool_call,
// rules.tool_results); "" when none is.
func meantPackage(pkg string, decisions []string) string {
	if meant := suggest.Closest(pkg, decisions); meant != "" {
		return meant
	}
	last := pkg[strings.LastIndex(pkg, ".")+1:]
	for _, d := range decisions {
		tail := strings.TrimPrefix(d, "turngate.")
		if strings.EqualFold(last, tail) || suggest.Closest(last, []string{tail}) != "" {
			return d
		}
	}
	return ""
}

// decisionLike returns the first rule of m named as a decision of either
// decision package, or close to one (block, blocks, redact), "" when none
// is.
func decisionLike(m *ast.Module) string {
	var all []string
	for _, rules := range decisionRules {
		all = append(all, rules...)
	}
	for _, r := range m.Rules {
		name := r.Head.Ref()[0].String()
		if slices.Contains(all, name) || suggest.Closest(name, all) != "" {
			return name
		}
	}
	return ""
}

// dataRefs returns the references into data that m makes: its imports and
// every data.… reference of its rules.
func dataRefs(m *ast.Module) []ast.Ref {
	var refs []ast.Ref
	for _, imp := range m.Imports {
		if ref, ok := imp.Path.Value.(ast.Ref); ok && ref.HasPrefix(ast.DefaultRootRef) {
			refs = append(refs, ref)
		}
	}
	ast.WalkRefs(m, func(ref ast.Ref) bool {
		if ref.HasPrefix(ast.DefaultRootRef) {
			refs = append(refs, ref)
		}
		return false
	})
	return refs
}

// overlaps reports whether ref reads some of package pkg's document: ref
// is inside it (data.turngate.lib.x for data.turngate.lib) or holds it
// (data.turngate). Only ref's constant prefix counts.
func overlaps(ref, pkg ast.Ref) bool {
	ref = ref.ConstantPrefix()
	n := min(len(ref), len(pkg))
	return ref[:n].Equal(pkg[:n])
}
