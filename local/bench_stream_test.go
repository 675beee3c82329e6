//go:build linux

package local_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// BenchmarkStream256MiBCaller streams 256 MiB of stdout from a running
// sandbox to an io.Discard writer through ExecuteCommand with default
// options (the result keeps all of it), against `head -c 256M /dev/zero`
// copied from an os/exec pipe in the same run. It reports the throughput
// ratio (goal ≥ 0.5×) and the caller's peak heap growth over one command
// (goal: at most the output + 64 MiB), sampled every millisecond.
func BenchmarkStream256MiBCaller(b *testing.B) {
	const size = 256 << 20
	command := "head -c " + strconv.Itoa(size) + " /dev/zero"
	ctx := context.Background()
	sb := openSandbox(b, local.Options{})
	if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil {
		b.Fatal(err)
	}
	var ours, base time.Duration
	var peak uint64
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		debug.FreeOSMemory()
		stop := sampleHeap()
		t0 := time.Now()
		r, err := sb.ExecuteCommand(ctx, command, nil, &sandbox.ExecOptions{Stdout: io.Discard})
		ours += time.Since(t0)
		if err != nil || r.ExitCode != 0 || len(r.Stdout) != size {
			b.Fatalf("ExecuteCommand: %v, %d bytes", err, len(r.Stdout))
		}
		peak = max(peak, stop())
		r = nil
		b.StopTimer()
		t1 := time.Now()
		pipeCopy(b, "sh", "-c", command)
		base += time.Since(t1)
		b.StartTimer()
	}
	b.ReportMetric(float64(base)/float64(ours), "x-pipe-throughput")
	b.ReportMetric(float64(peak)/(1<<20), "caller-peak-heap-MiB")
	b.ReportMetric(float64(peak)/(1<<20)-size/(1<<20), "caller-peak-over-output-MiB")
}

// sampleHeap samples the heap in use until the function it returns is
// called, which returns the peak growth over the heap at the start.
func sampleHeap() func() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	start := ms.HeapInuse
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > start {
				peak = max(peak, ms.HeapInuse-start)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// pipeCopy runs name args with os/exec, copying its stdout from a pipe to
// io.Discard.
func pipeCopy(b *testing.B, name string, args ...string) {
	c := exec.Command(name, args...)
	out, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, out); err != nil {
		b.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkExecuteTrueParallel8 runs ExecuteCommand("true") from 8
// goroutines on one running sandbox, against 8 goroutines running `true`
// through os/exec, alternately in the same run. It reports the throughput
// ratio (goal ≥ 0.7×) and the CPU per command of each (getrusage of this
// process and its children, plus the sandbox's cgroup for ours), and
// their ratio (goal ≤ 1.3×).
func BenchmarkExecuteTrueParallel8(b *testing.B) {
	const workers, perRound = 8, 8
	ctx := context.Background()
	sb := openSandbox(b, local.Options{})
	for range workers { // start, fill the session pool
		if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := parallel(workers, perRound, func() error { // warm the pool to 8 sessions
		_, err := sb.ExecuteCommand(ctx, "true", nil, nil)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	var oursT, baseT, oursCPU, boxCPU, baseCPU time.Duration
	b.ResetTimer()
	for range b.N {
		c0, g0, t0 := cpuSelf(), cgroupCPU(sb), time.Now()
		if err := parallel(workers, perRound, func() error {
			r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
			if err == nil && r.ExitCode != 0 {
				err = os.ErrInvalid
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		oursT += time.Since(t0)
		g := cgroupCPU(sb) - g0
		oursCPU += cpuSelf() - c0 + g
		boxCPU += g
		c1, t1 := cpuSelf(), time.Now()
		if err := parallel(workers, perRound, func() error { return exec.Command(path).Run() }); err != nil {
			b.Fatal(err)
		}
		baseT += time.Since(t1)
		baseCPU += cpuSelf() - c1
	}
	n := float64(b.N * workers * perRound)
	b.ReportMetric(float64(baseT)/float64(oursT), "x-os-exec-throughput")
	b.ReportMetric(float64(oursCPU.Microseconds())/n, "cpu-us/execute")
	b.ReportMetric(float64(boxCPU.Microseconds())/n, "cpu-us/execute-in-sandbox")
	b.ReportMetric(float64(baseCPU.Microseconds())/n, "cpu-us/os-exec")
	b.ReportMetric(float64(oursCPU)/float64(baseCPU), "x-os-exec-cpu")
}

// parallel runs f perRound times in each of workers goroutines and returns
// the first error.
func parallel(workers, perRound int, f func() error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perRound {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// cpuSelf returns the user and system CPU time of this process and of its
// waited-for children.
func cpuSelf() time.Duration {
	var t time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			t += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return t
}

// cgroupCPU returns the CPU time used so far by the sandbox's cgroup (0
// without one): the init and every command, which getrusage of this
// process does not see.
func cgroupCPU(sb *local.Sandbox) time.Duration {
	if d := local.CgroupDir(sb, "unified", false); d != "" {
		data, _ := os.ReadFile(filepath.Join(d, "cpu.stat"))
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				return time.Duration(us) * time.Microsecond
			}
		}
		return 0
	}
	if d := local.CgroupDir(sb, "cpuacct", false); d != "" {
		data, _ := os.ReadFile(filepath.Join(d, "cpuacct.usage"))
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return time.Duration(ns)
	}
	return 0
}
