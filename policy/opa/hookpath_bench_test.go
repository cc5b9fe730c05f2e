package opa_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
)

// BenchmarkHookPath measures the gateway's whole beforeToolCall hook on
// the decision-path benchmark's policy (testdata/bench): the rule set's
// hook with its decision record handed to an audit log that keeps the
// evaluated input ("hook"), opa.Policy.ToolCall alone ("toolcall") and the
// naive embedding ("naive"), interleaved. It reports each one's p50 and
// p99 and the first two's ratios to the naive ones (hook-p50-ratio, …).
func BenchmarkHookPath(b *testing.B) {
	modules, data := opa.BenchFiles(b)
	dir := b.TempDir()
	for _, f := range append(modules, data...) {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.Path)), f.Data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	rev, errs := ruleset.Load(dir, ruleset.Options{})
	if errs != nil {
		b.Fatal(errs)
	}
	// A generous deadline: a loaded machine must not turn a slow
	// iteration into a timeout failure.
	p, errs := opa.Compile(modules, data, opa.Options{Timeout: time.Minute})
	if errs != nil {
		b.Fatal(errs)
	}
	naive := opa.NaiveDecider(b)
	log := audit.New(io.Discard, nil, slog.New(slog.DiscardHandler))
	defer log.Close()
	hooks := rev.Hooks(log, ruleset.FailClosed)
	ctx := context.Background()
	for _, c := range []struct{ name, extra string }{{"allow", ""}, {"patch", opa.BenchPatchExtra}} {
		b.Run(c.name, func(b *testing.B) {
			tc := opa.BenchCall(b, c.extra)
			opa.BenchSides(b,
				opa.Side{Name: "hook", Call: func() error { _, err := hooks.BeforeToolCall(ctx, tc); return err }},
				opa.Side{Name: "toolcall", Call: func() error { _, _, err := p.ToolCall(ctx, tc); return err }},
				opa.Side{Name: "naive", Call: func() error { return naive(ctx, tc) }})
		})
	}
}
