package ruleset

import (
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
)

// Coverage is what a revision's tests exercise, per language: Rego by
// line, CEL by rule. A language with nothing to cover is at 100%.
type Coverage struct {
	Rego RegoCoverage `json:"rego"`
	CEL  CELCoverage  `json:"cel"`
}

// RegoCoverage is the Rego modules' line coverage as OPA measures it
// (`opa test --coverage`): a line holding a rule head or an expression is
// coverable, and covered when a test evaluated it.
type RegoCoverage struct {
	CoveredLines   int `json:"coveredLines"`
	CoverableLines int `json:"coverableLines"`
	// Percent is CoveredLines / CoverableLines, in percent.
	Percent float64            `json:"percent"`
	Files   []RegoFileCoverage `json:"files"`
}

// RegoFileCoverage is one module's line coverage.
type RegoFileCoverage struct {
	File           string  `json:"file"`
	CoveredLines   int     `json:"coveredLines"`
	CoverableLines int     `json:"coverableLines"`
	Percent        float64 `json:"percent"`
	// NotCovered are the line ranges no test evaluated.
	NotCovered []opa.LineRange `json:"notCovered,omitempty"`
}

// CELCoverage counts the CEL rules the test cases fired (enforced or
// shadow; a rule whose evaluation failed counts as exercised).
type CELCoverage struct {
	Rules int `json:"rules"`
	Fired int `json:"fired"`
	// Percent is Fired / Rules, in percent.
	Percent float64 `json:"percent"`
	// NotFired are the rules no test case fired, in evaluation order.
	NotFired []CELRule `json:"notFired"`
}

// CELRule names one CEL rule and where it is written.
type CELRule struct {
	Rule     string          `json:"rule"`
	Location policy.Location `json:"location"`
	Shadow   bool            `json:"shadow,omitempty"`
}

// coverage builds the report from OPA's line coverage (nil when the
// revision has no Rego modules) and the CEL rules the tests exercised.
func (r *Revision) coverage(rego *opa.Coverage, exercised map[string]bool) *Coverage {
	c := &Coverage{Rego: RegoCoverage{Percent: 100, Files: []RegoFileCoverage{}}, CEL: CELCoverage{NotFired: []CELRule{}}}
	if rego != nil {
		c.Rego.CoveredLines, c.Rego.CoverableLines = rego.CoveredLines, rego.CoverableLines
		c.Rego.Percent = percent(rego.CoveredLines, rego.CoverableLines)
		for _, f := range rego.Files {
			c.Rego.Files = append(c.Rego.Files, RegoFileCoverage{
				File:           locate(r.root, policy.Location{File: f.File}).File,
				CoveredLines:   f.CoveredLines,
				CoverableLines: f.CoverableLines,
				Percent:        percent(f.CoveredLines, f.CoverableLines),
				NotCovered:     f.NotCovered,
			})
		}
	}
	for _, hook := range []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforePersist, policy.HookOnChatError} {
		for _, rule := range r.cel.Rules(hook) {
			c.CEL.Rules++
			if exercised[rule.ID] {
				c.CEL.Fired++
				continue
			}
			c.CEL.NotFired = append(c.CEL.NotFired, CELRule{Rule: rule.ID, Location: locate(r.root, rule.Location), Shadow: rule.Shadow})
		}
	}
	c.CEL.Percent = percent(c.CEL.Fired, c.CEL.Rules)
	return c
}

// percent is n of total in percent; 100 when there is nothing to count.
func percent(n, total int) float64 {
	if total == 0 {
		return 100
	}
	return 100 * float64(n) / float64(total)
}
