//go:build linux

package local_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// BenchmarkPause measures Pause of a running sandbox (freeze every
// process, record it) against os/exec of `true` in the same run; each
// iteration resumes it untimed.
func BenchmarkPause(b *testing.B) { benchPauseResume(b, true) }

// BenchmarkResume measures Resume of a paused sandbox against os/exec of
// `true` in the same run; each iteration pauses it untimed.
func BenchmarkResume(b *testing.B) { benchPauseResume(b, false) }

func benchPauseResume(b *testing.B, pause bool) {
	testenv.NeedRoot(b, "pausing needs the cgroup freezer, and cgroups need root")
	ctx := context.Background()
	sb := newSandbox(b, local.Options{})
	if _, err := sb.Processes().Spawn(ctx, "sleep 1000", nil); err != nil {
		b.Fatal(err)
	}
	osExecTrue(b, 5)
	path, _ := exec.LookPath("true")
	b.ResetTimer()
	var timed, plain time.Duration
	for i := 0; i < b.N; i++ {
		first, second := sb.Pause, sb.Resume
		if !pause {
			first, second = sb.Resume, sb.Pause
			if err := sb.Pause(ctx); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := first(ctx); err != nil {
			b.Fatal(err)
		}
		timed += time.Since(t0)
		if pause {
			if err := second(ctx); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(t1)
	}
	what := "ms/resume"
	if pause {
		what = "ms/pause"
	}
	b.ReportMetric(float64(timed.Microseconds())/1000/float64(b.N), what)
	b.ReportMetric(float64(plain.Microseconds())/1000/float64(b.N), "ms/os-exec")
	b.ReportMetric(float64(timed)/float64(plain), "x-os-exec")
}
