package opa

import (
	"context"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// What the hook benchmark of package opa_test (hookpath_bench_test.go)
// shares with BenchmarkDecisionPath.

// BenchFiles returns the decision-path benchmark's modules and data.
func BenchFiles(t testing.TB) (modules, data []policy.File) {
	rf := benchPolicies(t)["bench"]
	return rf.modules, rf.data
}

// BenchCall is benchCall; BenchPatchExtra the patch case's extra field.
var (
	BenchCall       = benchCall
	BenchPatchExtra = benchCases[1].extra
)

// BenchSides is benchSides.
func BenchSides(b *testing.B, sides ...Side) { benchSides(b, sides...) }

// NaiveDecider returns the naive embedding of the benchmark's policy.
func NaiveDecider(t testing.TB) func(context.Context, *engine.ToolCallContext) error {
	n := newNaiveEmbedding(t, benchPolicies(t)["bench"])
	return func(ctx context.Context, tc *engine.ToolCallContext) error {
		_, err := n.decide(ctx, tc)
		return err
	}
}
