package celrules

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/cel-go/common/types"

	"github.com/turngate/turngate/engine"
)

// ApplyExternal applies overrides from outside the rules — an extension's
// beforeTurn result, decoded from JSON — on top of cfg, the rules' merged
// beforeTurn result, so that nothing outside the rules can loosen what a
// rule restricted. Each value is decoded and validated as a rule's set
// entry for the field would be (maxSteps at least 1, a valid toolChoice,
// messages with known roles, …). Then:
//
//   - a restrictive field cfg already sets combines with it as two rules'
//     values do: maxSteps, maxOutputTokens and maxRetries take the
//     minimum, timeout each bound's minimum, activeTools the intersection,
//     and toolChoice "none" wins;
//   - headers and providerOptions are shallow-merged (the reference's
//     extension merge);
//   - any other field replaces cfg's value.
//
// Fields that cannot be applied (an unknown field, tools, or a value of
// the wrong type or range) are skipped and reported in errs, one error per
// field naming it; the other fields still apply. ApplyExternal never
// returns a nil map error list with a partially decoded field: a field is
// applied whole or not at all.
func ApplyExternal(cfg *engine.TurnConfig, overrides map[string]any) (errs []error) {
	for _, name := range sortedKeys(overrides) {
		f := fields[name]
		if f == nil || f.turn == nil {
			errs = append(errs, fmt.Errorf("%s: not a TurnConfig field (want one of %s)", name, fieldNames("")))
			continue
		}
		v, err := f.decode(types.DefaultTypeAdapter.NativeToValue(overrides[name]))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		switch name {
		case "headers":
			cfg.Headers = mergeInto(cfg.Headers, v.(map[string]string))
			continue
		case "providerOptions":
			cfg.ProviderOptions = mergeInto(cfg.ProviderOptions, v.(map[string]any))
			continue
		}
		if cur, ok := current(cfg, f); ok && f.merge != mergeLast {
			s := slot{field: f, value: cur}
			s.combine(name, v)
			v = s.value
		}
		f.turn(cfg, v)
	}
	return errs
}

// current returns the value cfg sets for f in its decoded form, by
// decoding cfg's own JSON rendering of the field as an external value.
func current(cfg *engine.TurnConfig, f *fieldSpec) (any, bool) {
	j, ok := configFields(cfg)[f.name]
	if !ok {
		return nil, false
	}
	v, err := f.decode(types.DefaultTypeAdapter.NativeToValue(j))
	return v, err == nil
}

// mergeInto returns a new map with dst's entries overwritten by src's.
func mergeInto[V any](dst, src map[string]V) map[string]V {
	out := make(map[string]V, len(dst)+len(src))
	maps.Copy(out, dst)
	maps.Copy(out, src)
	return out
}

// ExternalFields lists the TurnConfig fields ApplyExternal accepts, in
// TurnConfig order.
func ExternalFields() []string {
	return slices.DeleteFunc(slices.Clone(fieldOrder), func(n string) bool { return fields[n].turn == nil })
}
