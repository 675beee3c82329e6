package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// A bench is one run of fastbench: its rows share the running sandbox.
type bench struct {
	c        config
	ctx      context.Context
	root     string // the rows' state dirs are made below it
	log      io.Writer
	truePath string
	shPath   string
	run      *running // made by the first row that needs it
	runErr   error
}

// A running sandbox, shared by the rows that need one running.
type running struct {
	stateDir string
	id       string
	sb       *local.Sandbox
	cfg      local.Config // what the sandboxes of the rows are made with
	note     string       // how cfg differs from every default, if it does
}

// measure runs the rows of c and returns their results.
func measure(c config, log io.Writer) []Result {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{c: c, ctx: ctx, log: log}
	var err error
	if b.truePath, err = exec.LookPath("true"); err == nil {
		b.shPath, err = exec.LookPath("sh")
	}
	if err == nil {
		b.root, err = b.makeRoot()
	}
	if err != nil {
		var rs []Result
		for _, r := range c.rows {
			rs = append(rs, failed(r, r, Goal{}, err))
		}
		return rs
	}
	defer b.cleanup()
	var rs []Result
	for _, row := range c.rows {
		if ctx.Err() != nil {
			rs = append(rs, failed(row, row, Goal{}, ctx.Err()))
			continue
		}
		fmt.Fprintf(log, "fastbench: row %s (%s)\n", row, time.Now().UTC().Format("15:04:05"))
		rs = append(rs, b.row(row)...)
	}
	return rs
}

// row measures one row.
func (b *bench) row(name string) []Result {
	switch name {
	case "create":
		return b.rowCreate()
	case "pool":
		return b.rowPool()
	case "cli":
		return b.rowCLI()
	case "pss":
		return b.rowPSS()
	case "concurrent":
		return b.rowConcurrent()
	case "stream":
		return b.rowStream()
	case "ls":
		return b.rowLs()
	default:
		return b.rowExec()
	}
}

// makeRoot makes the folder of the rows' state dirs, private to this user.
func (b *bench) makeRoot() (string, error) {
	if b.c.stateDir == "" {
		return os.MkdirTemp("", "fastbench-")
	}
	if err := os.MkdirAll(b.c.stateDir, 0o700); err != nil {
		return "", fmt.Errorf("-state-dir: %w", err)
	}
	return os.MkdirTemp(b.c.stateDir, "fastbench-")
}

// stateDir makes the state dir of a row.
func (b *bench) stateDir(name string) (string, error) {
	d := filepath.Join(b.root, name)
	if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	return d, nil
}

// cleanup destroys the running sandbox and removes the state dirs.
func (b *bench) cleanup() {
	if b.run != nil {
		destroy(b.run.sb)
	}
	if err := os.RemoveAll(b.root); err != nil {
		fmt.Fprintf(b.log, "fastbench: remove %s: %v\n", b.root, err)
	}
}

// destroy destroys sb, however the run ends.
func destroy(sb *local.Sandbox) {
	if sb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = sb.Destroy(ctx)
}

// running returns the shared running sandbox, made with every default, or
// (with -fallback-network, when the default network cannot start) with
// the blocked network.
func (b *bench) running() (*running, error) {
	if b.run != nil || b.runErr != nil {
		return b.run, b.runErr
	}
	dir, err := b.stateDir("running")
	if err != nil {
		b.runErr = err
		return nil, err
	}
	r := &running{stateDir: dir, id: "fastbench-run"}
	r.sb, err = startSandbox(b.ctx, local.Options{ID: r.id, StateDir: dir})
	if err != nil && b.c.fallback {
		r.id, r.note = "fastbench-run-blocked", "blocked network (the default failed: "+firstLine(err.Error(), 100)+")"
		r.cfg.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}
		r.sb, err = startSandbox(b.ctx, local.Options{ID: r.id, StateDir: dir, Config: r.cfg})
	}
	if err != nil {
		b.runErr = fmt.Errorf("start a sandbox: %w", err)
		return nil, b.runErr
	}
	b.run = r
	return r, nil
}

// startSandbox creates a sandbox and runs its first command (`true`); on
// failure nothing is left.
func startSandbox(ctx context.Context, opts local.Options) (*local.Sandbox, error) {
	sb, err := local.New(opts)
	if err != nil {
		return nil, err
	}
	if err := runTrue(ctx, sb); err != nil {
		destroy(sb)
		return nil, err
	}
	return sb, nil
}

// runTrue runs `true` in sb.
func runTrue(ctx context.Context, sb sandbox.Sandbox) error {
	r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
	switch {
	case err != nil:
		return err
	case r.ExitCode != 0:
		return fmt.Errorf("true exited %d: %s", r.ExitCode, firstLine(r.Stderr, 100))
	}
	return nil
}

// ms returns the milliseconds f takes.
func ms(f func() error) (float64, error) {
	t := time.Now()
	err := f()
	return float64(time.Since(t)) / float64(time.Millisecond), err
}

// interleave runs op and base alternately n times and returns their
// samples; the first error ends it.
func interleave(n int, op, base func() (float64, error)) (ops, bases []float64, err error) {
	for i := 0; i < n; i++ {
		v, err := op()
		if err != nil {
			return ops, bases, err
		}
		ops = append(ops, v)
		if v, err = base(); err != nil {
			return ops, bases, fmt.Errorf("baseline: %w", err)
		}
		bases = append(bases, v)
	}
	return ops, bases, nil
}

// command returns a function that times one run of name args.
func (b *bench) command(name string, args ...string) func() (float64, error) {
	return func() (float64, error) {
		return ms(func() error {
			cmd := exec.CommandContext(b.ctx, name, args...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, firstLine(string(out), 120))
			}
			return nil
		})
	}
}

// shTrue times os/exec of `sh -c true`.
func (b *bench) shTrue() func() (float64, error) { return b.command(b.shPath, "-c", "true") }
