package celrules

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// mergeKind says how the values several fired rules set for one field
// combine. Restrictive fields combine to the most restrictive value, so the
// result never depends on which file a cap is written in.
type mergeKind uint8

const (
	mergeLast      mergeKind = iota // the later rule's value wins
	mergeMin                        // the smallest int wins (maxSteps, maxOutputTokens, maxRetries)
	mergeIntersect                  // activeTools: only the tools every rule allows, sorted
	mergeNoneWins                   // toolChoice: "none" wins, else the later value
	mergeTimeout                    // timeout: the smallest non-zero totalMs and chunkMs
	mergeAppend                     // stopWhen: the conditions add up
)

// Resolutions, as policy.Conflict.Resolution names them.
const (
	resolutionMin          = "min"
	resolutionIntersection = "intersection"
	resolutionNoneWins     = "none-wins"
	resolutionLastWins     = "last-wins"
)

// contribution is one field value a fired rule set.
type contribution struct {
	rule  *rule
	field *fieldSpec
	value any
}

// slot is one field's combined value during a merge.
type slot struct {
	field *fieldSpec
	value any
	// by is the rule whose value won; for timeout, byChunk is the rule
	// whose chunkMs won and by the one whose totalMs won (empty while the
	// component is unset).
	by, byChunk string
	differ      bool // two rules set different values
}

// merged is the result of folding a hook's contributions: one slot per
// field, in the order fields were first set.
type merged struct {
	fired    bool
	slots    []slot
	contribs []contribution // for the rules of a conflict
}

// merge folds contributions, in rule order, into one value per field,
// appending the fields' slots to slots (the caller's buffer).
func merge(fired bool, contribs []contribution, slots []slot) merged {
	m := merged{fired: fired, slots: slots, contribs: contribs}
	for _, c := range contribs {
		i := slices.IndexFunc(m.slots, func(s slot) bool { return s.field == c.field })
		if i < 0 {
			m.slots = append(m.slots, newSlot(c))
			continue
		}
		m.slots[i].combine(c.rule.id, c.value)
	}
	return m
}

func newSlot(c contribution) slot {
	s := slot{field: c.field, value: c.value, by: c.rule.id}
	if t, ok := c.value.(engine.TimeoutConfig); ok && t.ChunkMs != 0 {
		// The rule won both bounds it set; an empty timeout names it as
		// the totalMs winner, which a later bound replaces.
		s.by, s.byChunk = ifSet(t.TotalMs, c.rule.id), c.rule.id
	}
	return s
}

// ifSet returns id when a timeout component n is set (non-zero).
func ifSet(n int64, id string) string {
	if n == 0 {
		return ""
	}
	return id
}

// combine merges a later rule's value v into the slot.
func (s *slot) combine(id string, v any) {
	switch s.field.merge {
	case mergeMin:
		n, cur := v.(int64), s.value.(int64)
		s.differ = s.differ || n != cur
		if n < cur {
			s.value, s.by = v, id
		}
	case mergeIntersect:
		cur, n := s.value.([]string), v.([]string)
		s.differ = s.differ || !sameSet(cur, n)
		kept := make([]string, 0, len(cur))
		for _, t := range cur {
			if slices.Contains(n, t) {
				kept = append(kept, t)
			}
		}
		// Sorted, so the list does not depend on which rule came first.
		slices.Sort(kept)
		if len(kept) != len(cur) {
			s.by = id
		}
		s.value = kept
	case mergeNoneWins:
		cur, n := s.value.(engine.ToolChoice), v.(engine.ToolChoice)
		s.differ = s.differ || cur != n
		if cur.Type != engine.ToolChoiceNone {
			s.value, s.by = v, id
		}
	case mergeTimeout:
		cur, n := s.value.(engine.TimeoutConfig), v.(engine.TimeoutConfig)
		cur.TotalMs, s.by = minBound(cur.TotalMs, n.TotalMs, s.by, id, &s.differ)
		cur.ChunkMs, s.byChunk = minBound(cur.ChunkMs, n.ChunkMs, s.byChunk, id, &s.differ)
		s.value = cur
	case mergeAppend:
		s.value, s.by = slices.Concat(s.value.([]engine.StopCondition), v.([]engine.StopCondition)), id
	default:
		s.differ = s.differ || !reflect.DeepEqual(s.value, v)
		s.value, s.by = v, id
	}
}

// minBound combines two timeout bounds, zero meaning none: the smaller
// bound wins, and two different bounds are a disagreement.
func minBound(cur, n int64, curBy, id string, differ *bool) (int64, string) {
	switch {
	case n == 0:
		return cur, curBy
	case cur == 0:
		return n, id
	}
	*differ = *differ || n != cur
	if n < cur {
		return n, id
	}
	return cur, curBy
}

// sameSet reports whether two lists hold the same strings.
func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

// setBy maps each field to the rule whose value won. A timeout whose
// totalMs and chunkMs came from different rules names each component
// ("timeout.totalMs", "timeout.chunkMs").
func (m *merged) setBy() map[string]string {
	if !m.fired {
		return nil
	}
	out := make(map[string]string, len(m.slots))
	for _, s := range m.slots {
		switch {
		case s.field.merge != mergeTimeout || s.by == "" || s.byChunk == "" || s.by == s.byChunk:
			out[s.field.name] = cmp.Or(s.by, s.byChunk)
		default:
			out["timeout.totalMs"], out["timeout.chunkMs"] = s.by, s.byChunk
		}
	}
	return out
}

// conflicts lists the fields two rules set to different values, and how
// they were combined.
func (m *merged) conflicts() []policy.Conflict {
	var out []policy.Conflict
	for _, s := range m.slots {
		if !s.differ {
			continue
		}
		var rules []string
		for _, c := range m.contribs {
			if c.field == s.field {
				rules = append(rules, c.rule.id)
			}
		}
		out = append(out, policy.Conflict{Field: s.field.name, Rules: rules, Resolution: s.resolution()})
	}
	return out
}

// resolution names how the slot's values were combined.
func (s *slot) resolution() string {
	switch s.field.merge {
	case mergeMin, mergeTimeout:
		return resolutionMin
	case mergeIntersect:
		return resolutionIntersection
	case mergeNoneWins:
		if s.value.(engine.ToolChoice).Type == engine.ToolChoiceNone {
			return resolutionNoneWins
		}
	}
	return resolutionLastWins
}

// config builds a hook config from the merged values, nil when no rule
// fired; set selects the field's setter for the config type.
func config[C any](m *merged, set func(*fieldSpec) func(*C, any)) *C {
	if !m.fired {
		return nil
	}
	cfg := new(C)
	for _, s := range m.slots {
		set(s.field)(cfg, s.value)
	}
	return cfg
}

// interleave returns the contributions of a and b, each in rule order, as
// one list in rule order.
func interleave(a, b []contribution) []contribution {
	out := make([]contribution, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].rule.index < b[0].rule.index {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// compiledRule is a rule with the file and spec it came from, for the
// load-time conflict check.
type compiledRule struct {
	src  *source
	spec *ruleSpec
	rule *rule
}

// conflictWarnings finds the conflicts visible without evaluating anything:
// two enforced rules of one hook whose conditions are the same (both absent
// or constant true, or the same text) setting a last-wins field to
// different constants. Each warning points at the later rule's value,
// which wins, and names the earlier rule. rules are in evaluation order.
func conflictWarnings(rules []compiledRule) policy.Errors {
	var out policy.Errors
	for j, b := range rules {
		cond, ok := condition(b)
		if !ok {
			continue
		}
		for _, bs := range b.rule.sets {
			bv, ok := constantValue(bs)
			if !ok {
				continue
			}
			// The nearest earlier rule that disagrees is the one the
			// author is likeliest to have meant to override.
			for i := j - 1; i >= 0; i-- {
				a := rules[i]
				if c, ok := condition(a); !ok || c != cond || a.spec.hook != b.spec.hook {
					continue
				}
				as := a.rule.setOf(bs.field)
				if as == nil {
					continue
				}
				av, ok := constantValue(*as)
				if !ok || reflect.DeepEqual(av, bv) {
					continue
				}
				e := b.src.errorAt(policy.CodeConflictWarning, bs.expr.loc.Line, bs.expr.loc.Column, fmt.Sprintf(
					"%s (%s) sets it to %s under the same condition; this later rule's %s wins (last-wins)",
					a.rule.id, as.expr.loc, valueText(av), valueText(bv)))
				e.Rule, e.Field = b.spec.name, bs.field.name
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// condition returns the text of an enforced rule's condition, "" for one
// that always holds; ok is false for shadow rules and rules that never fire.
func condition(c compiledRule) (string, bool) {
	w := c.rule.when
	switch {
	case c.rule.shadow:
		return "", false
	case w == nil:
		return "", true
	case w.constant != nil:
		return "", w.constant == types.True
	}
	return strings.TrimSpace(c.spec.when.Value), true
}

// constantValue returns the decoded value of a set entry whose expression
// reads no variable, when its field is resolved by "later wins".
func constantValue(s ruleSet) (any, bool) {
	if s.expr.constant == nil || (s.field.merge != mergeLast && s.field.merge != mergeNoneWins) {
		return nil, false
	}
	v := s.value
	if v == nil {
		var err error
		if v, err = s.field.decode(s.expr.constant); err != nil {
			return nil, false // reported as a load error already
		}
	}
	if tc, ok := v.(engine.ToolChoice); ok && tc.Type == engine.ToolChoiceNone {
		return nil, false // "none" wins whatever the order
	}
	return v, true
}

// setOf returns the rule's entry for field f, or nil.
func (r *rule) setOf(f *fieldSpec) *ruleSet {
	for i := range r.sets {
		if r.sets[i].field == f {
			return &r.sets[i]
		}
	}
	return nil
}

// valueText renders a field value for a message: a tool choice as its
// type unless it names a tool, anything else as JSON.
func valueText(v any) string {
	if tc, ok := v.(engine.ToolChoice); ok && tc.Type != engine.ToolChoiceTool {
		v = tc.Type
	}
	return jsonText(v)
}
