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

// checkDecisionNames reports each rule of a decision package whose name is
// not a decision of that package but is one of the other package's
// decisions (block in turngate.tool_result) or close to one of its own
// (blocks, substitue, aproval, redacts), with the decision meant.
func (b *build) checkDecisionNames(parsed map[string]*ast.Module) {
	for _, path := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[path]
		pkg := packageName(m)
		own, decision := decisionRules[pkg]
		if !decision {
			continue
		}
		for _, r := range m.Rules {
			name := r.Head.Ref()[0].String()
			if slices.Contains(own, name) || strings.HasPrefix(name, shadowMember) {
				continue
			}
			why := ""
			for other, rules := range decisionRules {
				if other != pkg && slices.Contains(rules, name) {
					why = fmt.Sprintf("%s is a decision of %s, not of %s, so nothing reads it here", name, other, pkg)
				}
			}
			if why == "" {
				meant := suggest.Closest(name, own)
				if meant == "" {
					continue // a helper rule
				}
				why = fmt.Sprintf("%s is not a decision of %s, so nothing reads it; did you mean %s?", name, pkg, meant)
			}
			b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location,
				fmt.Sprintf("%s (its decisions are %s; a helper rule needs a name that is not close to one)", why, strings.Join(own, ", "))))
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

// checkConventionNames reports each rule of a decision package named as
// another OPA integration's decision (deny, violation, allow, warn) that
// no rule of the compiled modules c reads.
func (b *build) checkConventionNames(c *ast.Compiler) {
	read := map[string]bool{} // "data.turngate.tool_call.deny"
	for _, m := range c.Modules {
		// Bodies, head values and keys, else branches: a compiled module's
		// references into data are absolute (data.turngate.tool_call.allow).
		ast.WalkRefs(m, func(ref ast.Ref) bool {
			read[ref.ConstantPrefix().String()] = true
			return false
		})
	}
	reported := map[string]bool{}
	for _, path := range slices.Sorted(maps.Keys(c.Modules)) {
		m := c.Modules[path]
		pkg := packageName(m)
		if _, decision := decisionRules[pkg]; !decision {
			continue
		}
		for _, r := range m.Rules {
			name := r.Head.Ref()[0].String()
			hint, conventional := opaConventions[name]
			full := m.Package.Path.String() + "." + name
			if !conventional || reported[full] || anyReadUnder(read, full) {
				continue
			}
			reported[full] = true
			b.errs = append(b.errs, b.src.error(policy.CodeSchema, r.Location, fmt.Sprintf(
				"%s is not a decision of %s and no rule reads it, so it never decides anything: %s (its decisions are %s)",
				name, pkg, hint, strings.Join(decisionRules[pkg], ", "))))
		}
	}
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
