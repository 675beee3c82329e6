package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// perClient is the commands each client runs in a round of the
// concurrent row.
const perClient = 4

// selfPID is this process's pid.
func selfPID() int { return os.Getpid() }

// rusageCPU returns the CPU time of this process and its waited children.
func rusageCPU() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// sandboxCPU returns a reader of the CPU time of the sandbox whose init
// is pid: its cgroup's usage where readable, else the init's own and its
// waited children's (/proc/PID/stat); and which it reads.
func sandboxCPU(pid int) (func() time.Duration, string) {
	if _, file, err := cgroupCPU(pid); err == nil {
		return func() time.Duration { d, _, _ := cgroupCPU(pid); return d }, file
	}
	return func() time.Duration {
		st, _ := readStat(pid)
		return time.Duration(st.CPU) * clockTick
	}, fmt.Sprintf("/proc/%d/stat utime+stime+cutime+cstime of the init (no readable cgroup)", pid)
}

// A concSample is one round of the concurrent row.
type concSample struct {
	cpuPerCmd  float64 // ms
	throughput float64 // commands/s
}

// concurrently runs f clients times perClient on as many goroutines as
// clients, and returns the CPU per command (of this process, its children
// and extra) and the throughput.
func concurrently(clients int, extra func() time.Duration, f func(client int) error) (concSample, error) {
	cpu0, x0, t0 := rusageCPU(), extra(), time.Now()
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perClient && errs[c] == nil; i++ {
				errs[c] = f(c)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	cpu := rusageCPU() - cpu0 + extra() - x0
	for _, err := range errs {
		if err != nil {
			return concSample{}, err
		}
	}
	n := float64(clients * perClient)
	return concSample{cpuPerCmd: float64(cpu) / float64(time.Millisecond) / n, throughput: n / wall.Seconds()}, nil
}

// rowConcurrent: -clients clients (one handle each) run `true` on the
// running sandbox at once, against as many goroutines running os/exec
// `true`: CPU per command and throughput.
func (b *bench) rowConcurrent() []Result {
	fail := func(err error) []Result {
		return []Result{failed("concurrent", figConcCPU, goalConcCPU, err), failed("concurrent", figConcTP, goalConcTP, err)}
	}
	run, err := b.running()
	if err != nil {
		return fail(err)
	}
	pid, err := initPID(run.id)
	if err != nil {
		return fail(err)
	}
	extra, source := sandboxCPU(pid)
	handles := make([]*local.Sandbox, b.c.clients)
	for i := range handles {
		if handles[i], err = local.New(local.Options{ID: run.id, StateDir: run.stateDir}); err != nil {
			return fail(err)
		}
	}
	none := func() time.Duration { return 0 }
	var cpu, cpuBase, tp, tpBase []float64
	for i := 0; i < b.c.rounds; i++ {
		s, err := concurrently(b.c.clients, extra, func(c int) error { return runTrue(b.ctx, handles[c]) })
		if err != nil {
			return fail(err)
		}
		sb, err := concurrently(b.c.clients, none, func(int) error { return exec.CommandContext(b.ctx, b.truePath).Run() })
		if err != nil {
			return fail(fmt.Errorf("baseline: %w", err))
		}
		cpu, tp = append(cpu, s.cpuPerCmd), append(tp, s.throughput)
		cpuBase, tpBase = append(cpuBase, sb.cpuPerCmd), append(tpBase, sb.throughput)
	}
	note := fmt.Sprintf("%d clients × %d commands a round; CPU = getrusage self+children + the sandbox's %s", b.c.clients, perClient, source)
	if run.note != "" {
		note += "; " + run.note
	}
	base := fmt.Sprintf("%d goroutines × os/exec `true`", b.c.clients)
	rc := Result{Row: "concurrent", Figure: figConcCPU, Unit: "ms CPU/cmd", Goal: goalConcCPU, Baseline: base, Note: note, OpSamples: cpu, BaseSamples: cpuBase}
	rt := Result{Row: "concurrent", Figure: figConcTP, Unit: "cmd/s", Goal: goalConcTP, Baseline: base, Note: note, OpSamples: tp, BaseSamples: tpBase}
	rc.finish()
	rt.finish()
	return []Result{rc, rt}
}
