package process

import (
	"context"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The benchmarks interleave each operation with its baseline, one of each
// per iteration, so that load from elsewhere on the machine hits both
// alike. They report the ratio of the total times and the ratio of the
// medians (robust to outliers), and the requests per command.

// BenchmarkExecuteTrue runs `true` through Manager.Execute, the client and
// the daemon over a unix socket, against os/exec of `sh -c true` (goal:
// at most 2×). ns/op is Execute alone.
func BenchmarkExecuteTrue(b *testing.B) {
	benchTrue(b, nil)
}

// BenchmarkExecuteTrueStreaming is BenchmarkExecuteTrue with a Stdout
// writer, which takes the async exec + follow path.
func BenchmarkExecuteTrueStreaming(b *testing.B) {
	benchTrue(b, &sandbox.ExecOptions{Stdout: io.Discard})
}

func benchTrue(b *testing.B, opts *sandbox.ExecOptions) {
	h := newHarness(b, harnessOptions{})
	h.warm(b)
	ctx := context.Background()
	var ours, base []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := h.m.Execute(ctx, "true", nil, opts)
		ours = append(ours, time.Since(start))
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("Execute(true) = %+v, %v", r, err)
		}
		b.StopTimer()
		start = time.Now()
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	reqs, _ := h.requests()
	report(b, ours, base, "x-os/exec")
	b.ReportMetric(float64(sum(base).Nanoseconds())/float64(b.N), "os/exec-ns/op")
	b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
}

// BenchmarkExecuteTrueStreamingDaytona runs a streaming `true` (a Stdout
// writer: async exec and follow) against the daemon's Daytona-behaviour
// mode, whose follow socket closes a second after the command ended,
// against the normal mode, and against the normal mode with its extensions
// hidden (plain: the same requests and commands as for Daytona, but a
// socket that closes at once), alternating. The ratios say what following
// a Daytona server costs: x-normal-mode against agentbox's server, and
// x-plain-mode how much of the close tail the client still pays (none when
// it learns the exit code while the socket lingers). ns/op is the Daytona
// mode's.
func BenchmarkExecuteTrueStreamingDaytona(b *testing.B) {
	daytona := newHarness(b, serverModes[2].with(harnessOptions{}))
	normal := newHarness(b, harnessOptions{})
	plain := newHarness(b, serverModes[1].with(harnessOptions{}))
	daytona.warm(b)
	normal.warm(b)
	plain.warm(b)
	opts := &sandbox.ExecOptions{Stdout: io.Discard}
	ctx := context.Background()
	run := func(h *harness) time.Duration {
		start := time.Now()
		r, err := h.m.Execute(ctx, "true", nil, opts)
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("Execute(true) = %+v, %v", r, err)
		}
		return time.Since(start)
	}
	var ours, base, plainBase []time.Duration
	b.ResetTimer()
	for range b.N {
		ours = append(ours, run(daytona))
		b.StopTimer()
		base = append(base, run(normal))
		plainBase = append(plainBase, run(plain))
		b.StartTimer()
	}
	b.StopTimer()
	reqs, _ := daytona.requests()
	report(b, ours, base, "x-normal-mode")
	report(b, ours, plainBase, "x-plain-mode")
	b.ReportMetric(float64(sum(base).Nanoseconds())/float64(b.N), "normal-ns/op")
	b.ReportMetric(float64(sum(plainBase).Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
}

// BenchmarkExecuteTrueSerial runs blocks of 16 Execute("true") back to
// back, alternating with blocks of 16 os/exec of `sh -c true`. Unlike
// BenchmarkExecuteTrue, work the daemon does in the background after a
// command (starting the shell for the next one) lands in our blocks, not
// in the baseline's: this is the cost of a command when an agent runs
// commands as fast as it can. ns/op is one Execute.
func BenchmarkExecuteTrueSerial(b *testing.B) {
	const block = 16
	h := newHarness(b, harnessOptions{})
	h.warm(b)
	ctx := context.Background()
	var ours, base time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(block, b.N-done)
		start := time.Now()
		for range n {
			r, err := h.m.Execute(ctx, "true", nil, nil)
			if err != nil || r.ExitCode != 0 {
				b.Fatalf("Execute(true) = %+v, %v", r, err)
			}
		}
		ours += time.Since(start)
		b.StopTimer()
		start = time.Now()
		for range n {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(start)
		b.StartTimer()
		done += n
	}
	b.StopTimer()
	reqs, _ := h.requests()
	b.ReportMetric(float64(ours)/float64(base), "x-os/exec")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "os/exec-ns/op")
	b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
}

// BenchmarkStream256MiB streams 256 MiB of stdout to an io.Discard writer
// against a plain os/exec pipe (goal: at least 0.25× its throughput).
func BenchmarkStream256MiB(b *testing.B) {
	const size = 256 << 20
	cmd := "head -c " + strconv.Itoa(size) + " /dev/zero"
	h := newHarness(b, harnessOptions{})
	h.warm(b)
	ctx := context.Background()
	var ours, base []time.Duration
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := h.m.Execute(ctx, cmd, nil, &sandbox.ExecOptions{Stdout: io.Discard, MaxRetainedBytes: 64 << 10})
		ours = append(ours, time.Since(start))
		if err != nil || r.ExitCode != 0 || int64(len(r.Stdout))+r.StdoutDroppedBytes != size {
			b.Fatalf("Execute = %+v, %v", r, err)
		}
		b.StopTimer()
		start = time.Now()
		if n := baselineOutput(b, cmd, true); n != size {
			b.Fatalf("pipe: %d bytes", n)
		}
		base = append(base, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	reqs, _ := h.requests()
	// Throughput ratio: the inverse of the time ratio.
	b.ReportMetric(float64(sum(base))/float64(sum(ours)), "x-pipe-throughput")
	b.ReportMetric(float64(median(base))/float64(median(ours)), "x-pipe-throughput-median")
	b.ReportMetric(float64(size)*float64(b.N)/sum(base).Seconds()/(1<<20), "pipe-MiB/s")
	b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
}

// report adds the ratios of ours to base: of the totals and of the medians.
func report(b *testing.B, ours, base []time.Duration, unit string) {
	b.ReportMetric(float64(sum(ours))/float64(sum(base)), unit)
	b.ReportMetric(float64(median(ours))/float64(median(base)), unit+"-median")
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
