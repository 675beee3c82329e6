//go:build linux

package local_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// BenchmarkFork measures a fork of a running sandbox (the default root:
// the host's folders, a disk image) holding 0, 1000 and 10000 small files
// in its home, to the fork's first command, and, in the same run, a
// create to its first command (create), the baseline of the ratio. Each
// reports ms/op; the fork's ratio to create is fork-ms / create-ms.
func BenchmarkFork(b *testing.B) {
	b.Run("create", func(b *testing.B) {
		state := newStateDir(b)
		benchLoop(b, func(ctx context.Context, i int) sandbox.Sandbox {
			sb, err := local.New(local.Options{StateDir: state, ID: "c-" + strconv.Itoa(i)})
			if err != nil {
				b.Fatal(err)
			}
			return sb
		})
	})
	for _, n := range []int{0, 1000, 10000} {
		b.Run("files="+strconv.Itoa(n), func(b *testing.B) {
			src := newSandbox(b, local.Options{StateDir: newStateDir(b)})
			mustRun(b, src, "mkdir -p ~/many && cd ~/many && i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do echo $i > f$i; i=$((i+1)); done")
			benchLoop(b, func(ctx context.Context, i int) sandbox.Sandbox {
				f, err := src.Fork(ctx, sandbox.ForkOptions{ID: "f-" + strconv.Itoa(i)})
				if err != nil {
					b.Fatal(err)
				}
				return f
			})
		})
	}
}

// benchLoop times make (which returns a sandbox, started or not) and the
// sandbox's first command b.N times, destroying each outside the timer,
// and reports ms/op.
func benchLoop(b *testing.B, make func(ctx context.Context, i int) sandbox.Sandbox) {
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		sb := make(ctx, i)
		if r, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/op")
}
