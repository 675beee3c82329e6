package server

import (
	"os"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// BenchmarkWriteAhead measures what write-ahead costs a create (its
// engine work waits for its record to be on disk: awaitRecord) against
// the baseline without, in one run: the load of BenchmarkServeLoad with
// fewer clients and sandboxes, on the fake and the local engine.
func BenchmarkWriteAhead(b *testing.B) {
	for _, eng := range []string{"fake", "local"} {
		for _, mode := range []string{"no-wait", "write-ahead"} {
			b.Run(eng+"/"+mode, func(b *testing.B) {
				testenv.Need(b, eng != "local" || os.Geteuid() == 0, "needs root: the local engine's default network and limits")
				cfg := loadConfig{clients: 8, n: 24, fake: eng == "fake", noWriteAhead: mode == "no-wait"}
				var create []time.Duration
				var total time.Duration
				for b.Loop() {
					res := runLoad(b, cfg)
					if b.Failed() {
						return
					}
					create = append(create, res.create...)
					total += res.total
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(percentile(create, 0.5)), "create-p50-ms")
				b.ReportMetric(ms(percentile(create, 0.99)), "create-p99-ms")
				b.ReportMetric(float64(len(create))/total.Seconds(), "sandboxes/s")
			})
		}
	}
}
