// Package suggest finds the name a typo was meant to be, for the "did you
// mean …?" of diagnostics.
package suggest

import (
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Closest returns the name in names closest to word, ignoring case, when it
// is close enough to be a typo of it: at most two letters, or a third of
// word's letters, differ. It returns "" when none is that close or when word
// is itself one of names. Ties go to the first name in sorted order.
func Closest(word string, names []string) string {
	sorted := slices.Sorted(slices.Values(names))
	best, bestD := "", max(2, len(word)/3)+1
	lw := strings.ToLower(word)
	for _, n := range sorted {
		if n == word {
			return ""
		}
		if d := levenshtein.ComputeDistance(lw, strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
