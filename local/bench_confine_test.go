//go:build linux

package local_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// BenchmarkConfinementCost measures what the default confinement (seccomp
// filter and Landlock) costs against an unconfined sandbox, interleaved in
// one run: create-to-first-command, ExecuteCommand("true"), and a command
// that makes many system calls (20 fork+exec of /bin/true).
func BenchmarkConfinementCost(b *testing.B) {
	ctx := context.Background()
	configs := []local.Confinement{{}, {Unconfined: true}}
	compare := func(b *testing.B, each func(i int, c local.Confinement)) {
		var took [2]time.Duration
		for i := 0; i < b.N; i++ {
			for j, c := range configs {
				t0 := time.Now()
				each(i, c)
				took[j] += time.Since(t0)
			}
		}
		b.ReportMetric(float64(took[0].Microseconds())/1000/float64(b.N), "ms/confined")
		b.ReportMetric(float64(took[1].Microseconds())/1000/float64(b.N), "ms/unconfined")
		b.ReportMetric(float64(took[0])/float64(took[1]), "x-unconfined")
	}
	b.Run("create", func(b *testing.B) {
		stateDir := newStateDir(b)
		compare(b, func(i int, c local.Confinement) {
			sb, err := local.New(local.Options{ID: "bench-" + strconv.Itoa(i) + strconv.FormatBool(c.Unconfined), StateDir: stateDir, Config: local.Config{Confinement: c}})
			if err != nil {
				b.Fatal(err)
			}
			run(b, sb, "true")
			b.StopTimer()
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		})
	})
	for _, cmd := range []struct{ name, command string }{
		{"true", "true"},
		{"fork-exec", "i=0; while [ $i -lt 20 ]; do /bin/true; i=$((i+1)); done"},
	} {
		b.Run(cmd.name, func(b *testing.B) {
			boxes := map[bool]*local.Sandbox{}
			for _, c := range configs {
				boxes[c.Unconfined] = newSandbox(b, local.Options{Config: local.Config{Confinement: c}})
				mustRun(b, boxes[c.Unconfined], cmd.command) // warm up
			}
			b.ResetTimer()
			compare(b, func(_ int, c local.Confinement) { mustRun(b, boxes[c.Unconfined], cmd.command) })
		})
	}
}
