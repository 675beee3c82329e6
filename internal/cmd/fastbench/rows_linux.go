package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/local"
)

// The figures of the table, as issue 29 words them, and their goals.
const (
	figCreate     = "create → first command (`true`), every default, no pool"
	figPool       = "the same through `local.Pool`"
	figCLI        = "CLI `agentbox exec --id X -- true` on a running sandbox"
	figPSS        = "idle sandbox, PSS incl. its share of helpers"
	figConcCPU    = "8 concurrent clients, `true` each: CPU per command"
	figConcTP     = "8 concurrent clients, `true` each: throughput"
	figStreamTP   = "256 MiB streamed, default retention: throughput"
	figStreamPeak = "256 MiB streamed, default retention: caller peak (VmHWM)"
	figLs         = "`sandbox ls` with 200 sandboxes vs empty"
	figExec       = "exec `true` in a running sandbox"
)

var (
	goalCreate   = Goal{Of: "ratio", Cmp: "<=", Limit: 10, Text: "≤ 10×"}
	goalPool     = Goal{Of: "ratio", Cmp: "<=", Limit: 5, Text: "≤ 5×"}
	goalCLI      = Goal{Of: "ratio", Cmp: "<=", Limit: 5, Text: "≤ 5×"}
	goalPSS      = Goal{Of: "op", Cmp: "<=", Limit: 1.5, Text: "≤ 1.5 MB"}
	goalConcCPU  = Goal{Of: "ratio", Cmp: "<=", Limit: 1.3, Text: "≤ 1.3× os/exec"}
	goalConcTP   = Goal{Of: "ratio", Cmp: ">=", Limit: 0.7, Text: "≥ 0.7× os/exec"}
	goalStreamTP = Goal{Of: "ratio", Cmp: ">=", Limit: 0.5, Text: "≥ 0.5× a pipe"}
	goalLs       = Goal{Of: "ratio", Cmp: "<=", Limit: 1.3, Text: "≤ 1.3×"}
	goalExec     = Goal{Of: "ratio", Cmp: "<=", Limit: 1.1, Text: "keep ≤ 1.1×"}
)

// rowCreate: New and the first command of a new sandbox, every default,
// against os/exec of `sh -c true`; Destroy outside the timer.
func (b *bench) rowCreate() []Result {
	dir, err := b.stateDir("create")
	if err != nil {
		return []Result{failed("create", figCreate, goalCreate, err)}
	}
	return []Result{b.creates("create", figCreate, goalCreate, local.Options{StateDir: dir})}
}

// rowPool: rowCreate through a local.Pool of one spare, refilled (Fill)
// outside the timer.
func (b *bench) rowPool() []Result {
	if os.Geteuid() != 0 {
		return []Result{failed("pool", figPool, goalPool, errors.New("n/a rootless: local.Pool needs root"))}
	}
	dir, err := b.stateDir("pool")
	if err != nil {
		return []Result{failed("pool", figPool, goalPool, err)}
	}
	pool, err := local.NewPool(local.PoolOptions{StateDir: dir})
	if err != nil {
		return []Result{failed("pool", figPool, goalPool, err)}
	}
	defer pool.Close()
	return []Result{b.creates("pool", figPool, goalPool, local.Options{StateDir: dir, Pool: pool})}
}

// creates times New + the first command of sandboxes made with opts (a
// warm-up one first, untimed: the first sandbox of a state dir makes what
// later ones share), interleaved with `sh -c true`.
func (b *bench) creates(row, fig string, g Goal, opts local.Options) Result {
	fill := func() error {
		if opts.Pool == nil {
			return nil
		}
		return opts.Pool.Fill(b.ctx)
	}
	opts.ID = row + "-warm-up"
	warm, err := startSandbox(b.ctx, opts)
	if err == nil {
		destroy(warm)
		err = fill()
	}
	if err != nil {
		return failed(row, fig, g, err)
	}
	i := 0
	op := func() (float64, error) {
		i++
		opts.ID = row + "-" + strconv.Itoa(i)
		var sb *local.Sandbox
		v, err := ms(func() error {
			var err error
			sb, err = local.New(opts)
			if err == nil {
				err = runTrue(b.ctx, sb)
			}
			return err
		})
		destroy(sb)
		if err == nil {
			err = fill()
		}
		return v, err
	}
	r := Result{Row: row, Figure: fig, Unit: "ms", Goal: g, Baseline: "os/exec `sh -c true`",
		Note: "warm-up sandbox first; Destroy (and the pool's Fill) outside the timer"}
	return b.finishRun(r, op, b.shTrue())
}

// finishRun interleaves op and base for the rounds and finishes r.
func (b *bench) finishRun(r Result, op, base func() (float64, error)) Result {
	var err error
	r.OpSamples, r.BaseSamples, err = interleave(b.c.rounds, op, base)
	if err != nil {
		return failed(r.Row, r.Figure, r.Goal, err)
	}
	r.finish()
	return r
}

// rowCLI: `agentbox exec --id X -- true` on the running sandbox against
// `sh -c true`.
func (b *bench) rowCLI() []Result {
	if b.c.cli == "" {
		return []Result{failed("cli", figCLI, goalCLI, errors.New("pass -cli PATH (the agentbox binary)"))}
	}
	run, err := b.running()
	if err != nil {
		return []Result{failed("cli", figCLI, goalCLI, err)}
	}
	op := b.command(b.c.cli, "--state-dir", run.stateDir, "exec", "--id", run.id, "--", "true")
	r := Result{Row: "cli", Figure: figCLI, Unit: "ms", Goal: goalCLI, Baseline: "os/exec `sh -c true`", Note: run.note}
	return []Result{b.finishRun(r, op, b.shTrue())}
}

// rowExec: ExecuteCommand("true") on the running sandbox against os/exec
// of `true`, three samples a round.
func (b *bench) rowExec() []Result {
	run, err := b.running()
	if err != nil {
		return []Result{failed("exec", figExec, goalExec, err)}
	}
	op := func() (float64, error) { return ms(func() error { return runTrue(b.ctx, run.sb) }) }
	r := Result{Row: "exec", Figure: figExec, Unit: "ms", Goal: goalExec, Baseline: "os/exec `true`", Note: run.note}
	rounds := b.c.rounds
	b.c.rounds *= 3
	defer func() { b.c.rounds = rounds }()
	return []Result{b.finishRun(r, op, b.command(b.truePath))}
}

// rowLs: `agentbox sandbox ls` of a state dir with -ls-n stopped
// sandboxes against that of an empty state dir.
func (b *bench) rowLs() []Result {
	fail := func(err error) []Result { return []Result{failed("ls", figLs, goalLs, err)} }
	if b.c.cli == "" {
		return fail(errors.New("pass -cli PATH (the agentbox binary)"))
	}
	run, err := b.running()
	if err != nil {
		return fail(err)
	}
	full, err := b.stateDir("ls-full")
	if err != nil {
		return fail(err)
	}
	empty, err := b.stateDir("ls-empty")
	if err != nil {
		return fail(err)
	}
	sbs, err := b.makeStopped(full, run.cfg)
	defer func() {
		for _, sb := range sbs {
			destroy(sb)
		}
	}()
	if err != nil {
		return fail(err)
	}
	lsFull := func() (float64, error) {
		var out []byte
		v, err := ms(func() error {
			var err error
			out, err = exec.CommandContext(b.ctx, b.c.cli, "--state-dir", full, "sandbox", "ls").Output()
			return err
		})
		if n := strings.Count(string(out), "ls-"); err == nil && n < b.c.lsN {
			err = fmt.Errorf("sandbox ls listed %d of the %d sandboxes", n, b.c.lsN)
		}
		return v, err
	}
	note := fmt.Sprintf("%d sandboxes created and stopped (Start, Stop) before timing, 2 at a time, with Options.DiskBudgetMB %d (their sparse disk images, counted at full size, exceed the default budget)", b.c.lsN, lsDiskBudgetMB(b.c.lsN))
	if run.note != "" {
		note += "; " + run.note
	}
	r := Result{Row: "ls", Figure: figLs, Unit: "ms", Goal: goalLs, Baseline: "`sandbox ls` of an empty state dir", Note: note}
	return []Result{b.finishRun(r, lsFull, b.command(b.c.cli, "--state-dir", empty, "sandbox", "ls"))}
}

// makeStopped creates -ls-n sandboxes in dir, two at a time, and stops
// them; it returns the handles made, for their removal.
func (b *bench) makeStopped(dir string, cfg local.Config) ([]*local.Sandbox, error) {
	sbs := make([]*local.Sandbox, b.c.lsN)
	errs := make([]error, b.c.lsN)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sb, err := local.New(local.Options{ID: fmt.Sprintf("ls-%03d", i), StateDir: dir, Config: cfg, DiskBudgetMB: lsDiskBudgetMB(b.c.lsN)})
				if err == nil {
					sbs[i] = sb
					if _, err = sb.Start(b.ctx); err == nil {
						err = sb.Stop(b.ctx)
					}
				}
				errs[i] = err
			}
		}()
	}
	for i := 0; i < b.c.lsN && b.ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	var made []*local.Sandbox
	for _, sb := range sbs {
		if sb != nil {
			made = append(made, sb)
		}
	}
	return made, errors.Join(append(errs, b.ctx.Err())...)
}

// lsDiskBudgetMB is the disk budget of the ls row's state dir: 16 GiB a
// sandbox. Their disk images are sparse and stay empty; the default budget
// (the free space) counts each at its full size and refuses the 200th.
func lsDiskBudgetMB(n int) int64 { return int64(n+1) << 14 }
