package opa

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/benchrules"
	"github.com/turngate/turngate/policy"
)

// BenchmarkCompile measures a revision's Rego compilation (parse, data,
// compile, prepare) without the schema type checking and with it: the
// shipped rules and generated policies of 100 and 500 rules reading input
// and data (internal/benchrules). Each iteration compiles the set both
// ways, interleaved, so a busy machine slows both alike; it reports the
// median time and the allocations of each (untyped-p50-ns, typed-p50-ns,
// untyped-allocs, typed-allocs). The difference is the load-time cost of
// typed Rego; a decision costs the same either way.
func BenchmarkCompile(b *testing.B) {
	type set struct {
		name          string
		modules, data []policy.File
	}
	shipped := set{name: "shipped"}
	for _, name := range []string{"tools.rego", "results.rego", "limits.data.yaml"} {
		src, err := os.ReadFile(filepath.Join("..", "..", "rules", name))
		if err != nil {
			b.Fatal(err)
		}
		f := policy.File{Path: name, Data: src}
		if filepath.Ext(name) == ".rego" {
			shipped.modules = append(shipped.modules, f)
		} else {
			shipped.data = append(shipped.data, f)
		}
	}
	sets := []set{shipped}
	for _, n := range []int{100, 500} {
		src, data := benchrules.Rego(n)
		sets = append(sets, set{fmt.Sprintf("rules=%d", n),
			[]policy.File{{Path: "bench.rego", Data: []byte(src)}}, []policy.File{{Path: "data.json", Data: []byte(data)}}})
	}
	for _, s := range sets {
		b.Run(s.name, func(b *testing.B) {
			var times [2][]time.Duration
			var allocs [2]uint64
			var ms runtime.MemStats
			for b.Loop() {
				for i, typed := range []bool{false, true} {
					runtime.ReadMemStats(&ms)
					before := ms.Mallocs
					start := time.Now()
					if _, errs := compile(s.modules, s.data, testOptions, typed); errs != nil {
						b.Fatal(errs)
					}
					times[i] = append(times[i], time.Since(start))
					runtime.ReadMemStats(&ms)
					allocs[i] += ms.Mallocs - before
				}
			}
			for i, name := range []string{"untyped", "typed"} {
				slices.Sort(times[i])
				b.ReportMetric(float64(times[i][len(times[i])/2].Nanoseconds()), name+"-p50-ns")
				b.ReportMetric(float64(allocs[i])/float64(len(times[i])), name+"-allocs")
			}
		})
	}
}
