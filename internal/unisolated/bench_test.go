package unisolated_test

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/unisolated"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// startBench returns a running sandbox without spec validation (which
// would dominate the timings), destroyed when b ends.
func startBench(b *testing.B) *unisolated.Sandbox {
	b.Helper()
	sb, err := unisolated.New(unisolated.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Destroy(context.Background()) })
	if _, err := sb.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return sb
}

// timeLoop runs f n times and returns the mean time per run.
func timeLoop(b *testing.B, n int, f func() error) time.Duration {
	b.Helper()
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkExecuteTrue measures one ExecuteCommand("true") through the
// whole stack (process manager, toolbox client, unix socket, daemon) and
// reports it as a ratio to os/exec of `sh -c true` measured in the same run.
func BenchmarkExecuteTrue(b *testing.B) {
	ctx := context.Background()
	sb := startBench(b)
	run := func() error {
		r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
		if err == nil && r.ExitCode != 0 {
			b.Fatalf("exit %d", r.ExitCode)
		}
		return err
	}
	run() // warm the session pool
	base := timeLoop(b, 50, func() error { return exec.Command("sh", "-c", "true").Run() })
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(base.Microseconds())/1000, "os/exec-ms")
	b.ReportMetric(float64(per)/float64(base), "x-os/exec")
}

// BenchmarkStreamThroughput measures 32 MiB of stdout streamed to a writer
// and reports the ratio to reading the same command's output through a
// plain pipe with os/exec.
func BenchmarkStreamThroughput(b *testing.B) {
	const size = 32 << 20
	ctx := context.Background()
	sb := startBench(b)
	cmd := "head -c 33554432 /dev/zero"
	base := timeLoop(b, 3, func() error {
		c := exec.Command("sh", "-c", cmd)
		c.Stdout = io.Discard
		return c.Run()
	})
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var n countWriter
		r, err := sb.ExecuteCommand(ctx, cmd, nil, &sandbox.ExecOptions{Stdout: &n, MaxRetainedBytes: 1})
		if err != nil {
			b.Fatal(err)
		}
		if n != size || r.ExitCode != 0 {
			b.Fatalf("streamed %d bytes, exit %d", n, r.ExitCode)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(size)/base.Seconds()/(1<<20), "pipe-MiB/s")
	b.ReportMetric(float64(base)/float64(per), "x-pipe")
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}
