package process

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Spawn starts command (a shell line, not quoted) in the background on a
// session of its own and returns at once. ctx bounds only the start: use
// Kill to end the process.
//
// opts.Stdout and opts.Stderr, when set, receive all of the process's
// output as it arrives. Each stream retains opts.MaxRetainedBytes (default
// 1 MiB). The timeout (opts.Timeout, else the Manager's default) counts
// from the start; on expiry the process tree is killed and Wait reports
// exit code 124, TimedOut and Killed. With opts.Stdin set (which needs the
// agentbox stdin extension, see Execute) it is copied to the process and
// its stdin closed at EOF; otherwise stdin stays open for SendStdin until
// CloseStdin.
//
// The pid is an id of this Manager ("proc-1", "proc-2", …), not an
// operating system pid. When the process ends by itself its session returns
// to the pool.
func (m *Manager) Spawn(ctx context.Context, command string, opts *sandbox.ExecOptions) (sandbox.Process, error) {
	if opts == nil {
		opts = &sandbox.ExecOptions{}
	}
	pl, err := m.prepare(ctx, command, opts, DefaultSpawnRetainedBytes, false)
	if err != nil {
		return nil, err
	}
	if opts.Stdin != nil {
		if err := m.requireStdin(ctx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	s, cid, err := m.startAsync(ctx, pl)
	if err != nil {
		return nil, err
	}
	p := &proc{
		m:        m,
		line:     pl.line,
		s:        s,
		cid:      cid,
		timeout:  pl.timeout,
		start:    start,
		out:      newStreams(pl.retain, opts.Stdout, opts.Stderr),
		done:     make(chan struct{}),
		killDone: make(chan struct{}),
	}
	// Keep ctx's values, not its cancellation.
	fctx, cancel := withTimeout(context.WithoutCancel(ctx), pl.timeout)
	p.cancel = cancel
	if opts.Stdin != nil {
		p.stdinDone = make(chan struct{})
	}
	m.mu.Lock()
	m.nextID++
	p.pid = "proc-" + strconv.FormatUint(m.nextID, 10)
	m.procs[p.pid] = p
	m.order = append(m.order, p.pid)
	m.mu.Unlock()

	go p.run(fctx)
	if opts.Stdin != nil {
		go func() {
			defer close(p.stdinDone)
			m.copyStdin(fctx, s.id, cid, opts.Stdin)
		}()
	}
	return p, nil
}

// List describes every tracked process, in spawn order.
func (m *Manager) List(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	procs := make([]*proc, 0, len(m.order))
	for _, pid := range m.order {
		procs = append(procs, m.procs[pid])
	}
	m.mu.Unlock()
	infos := make([]sandbox.ProcessInfo, 0, len(procs))
	for _, p := range procs {
		info := sandbox.ProcessInfo{PID: p.pid, Command: p.line, Running: true}
		if code, ok := p.ExitCode(); ok {
			info.Running, info.ExitCode = false, &code
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// Get returns the tracked process pid. A process that has exited is
// returned once more and then forgotten. It fails with an error matching
// sandbox.ErrNotFound for an unknown or forgotten pid.
func (m *Manager) Get(ctx context.Context, pid string) (sandbox.Process, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return nil, err
	}
	p := m.lookup(pid)
	if p == nil {
		return nil, fmt.Errorf("process %q: %w (it never existed, or it exited and was already fetched)", pid, sandbox.ErrNotFound)
	}
	if _, exited := p.ExitCode(); exited {
		m.forget(pid)
	}
	return p, nil
}

// Kill ends the tracked process pid and its whole tree, waits for it, and
// forgets it. It reports false when pid is unknown or had already exited
// (an exited process is forgotten too).
func (m *Manager) Kill(ctx context.Context, pid string) (bool, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return false, err
	}
	p := m.lookup(pid)
	if p == nil {
		return false, nil
	}
	killed, err := p.Kill(ctx)
	m.forget(pid)
	return killed, err
}

func (m *Manager) ensureRunning(ctx context.Context) error {
	if m.host == nil {
		return nil
	}
	return m.host.EnsureRunning(ctx)
}

func (m *Manager) lookup(pid string) *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.procs[pid]
}

func (m *Manager) forget(pid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.procs[pid]; ok {
		delete(m.procs, pid)
		m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == pid })
	}
}

// proc is a spawned process. It implements sandbox.Process.
type proc struct {
	m       *Manager
	pid     string
	line    string
	s       session
	cid     string
	timeout time.Duration
	start   time.Time
	out     *streams
	cancel  context.CancelFunc // ends the follower and the stdin copier

	done      chan struct{} // closed when the process has exited and its session is settled
	killDone  chan struct{} // closed when Kill has tried to delete the session
	stdinDone chan struct{} // closed when the copying of opts.Stdin ended; nil without

	mu      sync.Mutex
	killing bool
	deleted bool // Kill deleted the session
	exited  bool
	code    int
	res     *sandbox.CommandResult
	err     error
}

var _ sandbox.Process = (*proc)(nil)

// run follows the process's output until it ends, then settles its
// session: back to the pool after a normal exit, deleted otherwise.
func (p *proc) run(ctx context.Context) {
	defer close(p.done)
	code, killed, delivered, err := p.m.follow(ctx, p.s.id, p.cid, p.out)
	timedOut := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	p.cancel()

	p.mu.Lock()
	killing := p.killing
	var res *sandbox.CommandResult
	var settle func()
	switch {
	case killing:
		res = result(p.line, sandbox.ExitKilled, p.out, time.Since(p.start))
		res.Killed, err = true, nil
	case err == nil && !killed:
		res = result(p.line, code, p.out, time.Since(p.start))
		settle = func() { p.m.release(p.s, kept(p.s, delivered, p.out.total())) }
	case err == nil: // the session was deleted by someone else
		res = result(p.line, sandbox.ExitKilled, p.out, time.Since(p.start))
		res.Killed = true
	case timedOut:
		res = timedOutResult(&plan{line: p.line, timeout: p.timeout}, p.out, time.Since(p.start))
		err = nil
		settle = func() { p.m.deleteSession(p.s.id) }
	default:
		err = fmt.Errorf("process %s: %w", p.pid, &toolboxError{op: "following the output", err: err})
		settle = func() { p.m.deleteSession(p.s.id) }
	}
	p.exited, p.res, p.err = true, res, err
	p.code = -1
	if res != nil {
		p.code = res.ExitCode
	}
	p.mu.Unlock()

	if killing {
		<-p.killDone
		p.mu.Lock()
		deleted := p.deleted
		p.mu.Unlock()
		if !deleted {
			p.m.deleteSession(p.s.id)
		}
	}
	if settle != nil {
		settle()
	}
}

// PID returns the process's id in its Manager.
func (p *proc) PID() string { return p.pid }

// Command returns the command line passed to Spawn.
func (p *proc) Command() string { return p.line }

// Stdout returns the standard output retained so far.
func (p *proc) Stdout() string { return p.out.stdout.String() }

// Stderr returns the standard error retained so far.
func (p *proc) Stderr() string { return p.out.stderr.String() }

// exitedError is the error of SendStdin after the process exited. It
// matches sandbox.ErrExited.
type exitedError struct {
	pid   string
	code  int
	known bool
}

func (e *exitedError) Error() string {
	if !e.known {
		return "process " + e.pid + " has already exited"
	}
	return "process " + e.pid + " has already exited with code " + strconv.Itoa(e.code)
}

// Is reports whether target is sandbox.ErrExited.
func (e *exitedError) Is(target error) bool { return target == sandbox.ErrExited }

func (p *proc) exitedError(code int, known bool) error {
	return &exitedError{pid: p.pid, code: code, known: known}
}

// SendStdin writes data to the process's standard input. With the agentbox
// stdin extension the bytes arrive exactly; a plain Daytona daemon appends
// a newline when data lacks one. It fails with an error matching
// sandbox.ErrExited once the process has exited.
func (p *proc) SendStdin(ctx context.Context, data []byte) error {
	if code, ok := p.ExitCode(); ok {
		return p.exitedError(code, true)
	}
	err := p.m.client.SendInput(ctx, p.s.id, p.cid, data)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandbox.ErrExited), errors.Is(err, sandbox.ErrNotFound):
		// The command ended (or was killed) while we asked; report its code
		// if it is known soon.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-p.done:
			code, _ := p.ExitCode()
			return p.exitedError(code, true)
		case <-t.C:
		case <-ctx.Done():
		}
		return p.exitedError(0, false)
	}
	return fmt.Errorf("process %s: %w", p.pid, &toolboxError{op: "sending input", err: err})
}

// CloseStdin closes the process's standard input so that readers see EOF.
// It needs the agentbox stdin extension and fails with an error matching
// sandbox.ErrUnsupported against a plain Daytona daemon. Closing the input
// of a process that has exited does nothing.
func (p *proc) CloseStdin(ctx context.Context) error {
	if _, ok := p.ExitCode(); ok {
		return nil
	}
	err := p.m.client.CloseInput(ctx, p.s.id, p.cid)
	if err == nil || errors.Is(err, sandbox.ErrExited) || errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if errors.Is(err, sandbox.ErrUnsupported) {
		return fmt.Errorf("process %s: closing stdin: %w", p.pid, err)
	}
	return fmt.Errorf("process %s: %w", p.pid, &toolboxError{op: "closing stdin", err: err})
}

// Kill deletes the process's session, which kills the process and every
// process it started, and waits for it to end. Wait then reports exit code
// 137 and Killed. Kill reports false if the process had already exited (or
// another Kill got there first).
func (p *proc) Kill(ctx context.Context) (bool, error) {
	p.mu.Lock()
	if p.exited || p.killing {
		p.mu.Unlock()
		return false, nil
	}
	p.killing = true
	p.mu.Unlock()

	err := p.m.client.DeleteSession(ctx, p.s.id)
	ok := err == nil || errors.Is(err, sandbox.ErrNotFound)
	p.mu.Lock()
	p.deleted = ok
	p.mu.Unlock()
	close(p.killDone)
	p.cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	// When the deletion failed, run retried it without the caller's
	// deadline before closing done.
	return true, nil
}

// Wait waits for the process to exit and returns its result. It may be
// called many times, from many goroutines; each gets its own copy.
// Cancelling ctx ends the waiting only.
func (p *proc) Wait(ctx context.Context) (*sandbox.CommandResult, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	r := *p.res
	return &r, nil
}

// ExitCode returns the exit code and true once the process has exited. A
// process whose output could not be followed to the end (the connection
// to the sandbox was lost) reports -1.
func (p *proc) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.exited
}

// waitGoroutines waits until the process's goroutines have ended.
func (p *proc) waitGoroutines(ctx context.Context) error {
	for _, ch := range []chan struct{}{p.done, p.stdinDone} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
