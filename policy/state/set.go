package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/turngate/turngate/internal/suggest"

	"github.com/turngate/turngate/policy"
)

// Set is the declared state of one revision (or of the config's limits).
// It is immutable and safe for concurrent use; a nil *Set declares nothing.
type Set struct {
	decls  []*Decl
	byName map[string]*Decl
	// toolNames are the tools entries of the declaration files.
	toolNames []policy.ToolName
}

// ToolNames returns the tool names the declaration files' tools lists
// spell out, where they do: a misspelt one counts nothing, so `turngate
// check --config` warns about those no configured tool has, as for rules.
func (s *Set) ToolNames() []policy.ToolName {
	if s == nil {
		return nil
	}
	return slices.Clone(s.toolNames)
}

// NewSet checks decls as the file kind does and returns them as a Set;
// the error lists every problem. The gateway's config limits use it.
func NewSet(decls ...*Decl) (*Set, error) {
	s := &Set{byName: map[string]*Decl{}}
	var msgs []string
	for _, d := range decls {
		for _, p := range d.check() {
			msgs = append(msgs, fmt.Sprintf("state %q: %s: %s", d.Name, p.key, p.msg))
		}
		if s.byName[d.Name] != nil {
			msgs = append(msgs, fmt.Sprintf("state %q is declared twice", d.Name))
		}
		s.add(d)
	}
	if msgs != nil {
		return nil, fmt.Errorf("declaring state: %s", strings.Join(msgs, "; "))
	}
	return s, nil
}

func (s *Set) add(d *Decl) {
	s.decls = append(s.decls, d)
	s.byName[d.Name] = d
}

// Decls returns the declarations in declaration order.
func (s *Set) Decls() []*Decl {
	if s == nil {
		return nil
	}
	return s.decls
}

// Lookup returns the declaration called name, or nil.
func (s *Set) Lookup(name string) *Decl {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// Len returns how many states the set declares.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.decls)
}

// Names returns the declared names in declaration order.
func (s *Set) Names() []string {
	var out []string
	for _, d := range s.Decls() {
		out = append(out, d.Name)
	}
	return out
}

// Counting returns the declarations that count an event of kind ev of the
// tool called tool ("" for other events), nil when none does.
func (s *Set) Counting(ev EventKind, tool string) []*Decl {
	var out []*Decl
	for _, d := range s.Decls() {
		if d.Counts(ev, tool) {
			out = append(out, d)
		}
	}
	return out
}

// Named returns the declarations called names, in names' order, skipping
// names the set does not declare.
func (s *Set) Named(names []string) []*Decl {
	var out []*Decl
	for _, n := range names {
		if d := s.Lookup(n); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// Values are the state values read for one event, by declaration name:
// int64 for count and countDistinct, float64 for sum, map[string]any
// {"happened": bool, "at": string} for happenedBefore and float64 seconds
// for timeSinceLast (absent when nothing happened in the window). Decoded
// from a record, numbers are json.Number.
type Values map[string]any

// Schema returns the JSON Schema of input.state (and CEL's state
// variable): a closed object with one property per declaration, typed by
// its kind, so a misspelt name is a load error. Only timeSinceLast is
// optional.
func (s *Set) Schema() map[string]any {
	props := map[string]any{}
	var required []any
	for _, d := range s.Decls() {
		props[d.Name] = d.schema()
		if d.Kind != TimeSinceLast {
			required = append(required, d.Name)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"description":          "the declared state the rules read (state.yaml, *.state.yaml), as read before this event",
		"additionalProperties": false,
		"properties":           props,
	}
	if required != nil {
		schema["required"] = required
	}
	return schema
}

func (d *Decl) schema() map[string]any {
	desc := fmt.Sprintf("%s of %s", d.Kind, d.Of)
	if len(d.Tools) > 0 {
		desc += " of " + strings.Join(d.Tools, ", ")
	}
	if len(d.Outcomes) > 0 {
		desc += " (" + strings.Join(d.Outcomes, ", ") + ")"
	}
	if len(d.Scope) > 0 {
		parts := make([]string, len(d.Scope))
		for i, p := range d.Scope {
			parts[i] = p.String()
		}
		desc += " by " + strings.Join(parts, ", ")
	}
	desc += ", " + d.Window.String()
	switch d.Kind {
	case Count, CountDistinct:
		return map[string]any{"type": "integer", "description": desc}
	case HappenedBefore:
		return map[string]any{
			"type": "object", "description": desc, "additionalProperties": false,
			"required": []any{"happened", "at"},
			"properties": map[string]any{
				"happened": map[string]any{"type": "boolean", "description": "whether it happened within the window"},
				"at":       map[string]any{"type": "string", "description": "when it last happened (RFC 3339), \"\" if not"},
			},
		}
	}
	return map[string]any{"type": "number", "description": desc}
}

// didYouMean returns "; did you mean X?" for the candidate closest to s
// when it is close enough to be a typo, else the candidates there are.
func didYouMean(s string, candidates []string) string {
	if best := suggest.Closest(s, candidates); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	return fmt.Sprintf(" (want one of %s)", strings.Join(sorted, ", "))
}
