package process

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ErrDetached is the error of Wait on a process whose Manager was detached
// or closed before the process exited: the process may run on, but this
// value no longer follows it. Reattach with Get or Attach.
var ErrDetached = errors.New("process: the handle was detached from the process")

// bgProcess is a background process seen through one Manager: spawned by
// it, or reattached with Get or Attach. It implements sandbox.Process.
type bgProcess struct {
	m       *Manager
	pid     string
	line    string
	sid     string // the session holding the process
	cid     string // its command in that session
	owned   bool   // spawned through m: Close kills it
	timeout time.Duration
	start   time.Time
	out     *streams
	cancel  context.CancelCauseFunc // ends the follower and the stdin copier

	done      chan struct{} // closed when the follower has settled the process
	killDone  chan struct{} // closed when Kill has tried to delete the session
	stdinDone chan struct{} // closed when the copying of opts.Stdin ended; nil without

	mu       sync.Mutex
	killing  bool
	deleted  bool // Kill deleted the session
	released bool // the follower stopped for Close or Detach
	exited   bool
	code     int
	res      *sandbox.CommandResult
	err      error
}

var _ sandbox.Process = (*bgProcess)(nil)

// errReleased is the cancellation cause of a follower stopped by Close or
// Detach.
var errReleased = errors.New("released")

func newBgProcess(m *Manager, pid, line, sid, cid string, out *streams) *bgProcess {
	return &bgProcess{
		m: m, pid: pid, line: line, sid: sid, cid: cid, out: out, start: time.Now(),
		done: make(chan struct{}), killDone: make(chan struct{}),
	}
}

// follow starts the goroutine following the process's output until it
// ends, with ctx's values but not its cancellation, bounded by p.timeout.
// It returns the goroutine's context, which ends with it.
func (p *bgProcess) follow(ctx context.Context) context.Context {
	fctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.CancelFunc(func() {})
	if p.timeout > 0 {
		fctx, stop = context.WithTimeout(fctx, p.timeout)
	}
	p.cancel = func(cause error) {
		cancel(cause)
		stop()
	}
	p.m.mu.Lock()
	p.m.live[p] = struct{}{}
	p.m.mu.Unlock()
	go p.run(fctx)
	return fctx
}

// run follows the process's output until it ends, then records its result.
// A process killed by its timeout, or whose output could not be followed,
// is killed (deleting its session) when this Manager spawned it; a normal
// exit leaves the session, which holds the process's record, in place.
func (p *bgProcess) run(ctx context.Context) {
	defer close(p.done)
	defer func() {
		p.m.mu.Lock()
		delete(p.m.live, p)
		p.m.mu.Unlock()
	}()
	code, killed, _, err := p.m.follow(ctx, p.sid, p.cid, p.out, nil, 0)
	cause := context.Cause(ctx)
	p.cancel(nil)

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
	case err == nil, // the session was deleted by someone else
		errors.Is(err, sandbox.ErrNotFound) && cause == nil: // … before the follow began
		res = result(p.line, sandbox.ExitKilled, p.out, time.Since(p.start))
		res.Killed, err = true, nil
	case errors.Is(cause, errReleased):
		p.released, p.err = true, fmt.Errorf("process %s: %w", p.pid, ErrDetached)
		p.mu.Unlock()
		return
	case errors.Is(cause, context.DeadlineExceeded):
		res = timedOutResult(&plan{line: p.line, timeout: p.timeout}, p.out, time.Since(p.start))
		err = nil
		settle = func() { p.m.deleteSession(p.sid) }
	default:
		err = fmt.Errorf("process %s: %w", p.pid, p.m.fail("following the output", err))
		if p.owned {
			settle = func() { p.m.deleteSession(p.sid) }
		}
	}
	p.setResult(res, err)
	p.mu.Unlock()

	if killing {
		<-p.killDone
		p.mu.Lock()
		deleted := p.deleted
		p.mu.Unlock()
		if !deleted {
			p.m.deleteSession(p.sid)
		}
	}
	if settle != nil {
		settle()
	}
}

// setResult records how the process ended; p.mu is held. A nil res (the
// output could not be followed) reports exit code -1.
func (p *bgProcess) setResult(res *sandbox.CommandResult, err error) {
	p.exited, p.res, p.err = true, res, err
	p.code = -1
	if res != nil {
		p.code = res.ExitCode
	}
}

// finished records the result of a process that had exited when it was
// reattached: no goroutine follows it.
func (p *bgProcess) finished(code int) {
	p.mu.Lock()
	p.setResult(result(p.line, code, p.out, time.Since(p.start)), nil)
	p.mu.Unlock()
	p.cancel = func(error) {}
	close(p.done)
}

// sessionDeleted reports whether Kill deleted the process's session.
func (p *bgProcess) sessionDeleted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deleted
}

// release stops following the process (Close, Detach).
func (p *bgProcess) release() { p.cancel(errReleased) }

// PID returns the process's id in its sandbox.
func (p *bgProcess) PID() string { return p.pid }

// Command returns the command line passed to Spawn.
func (p *bgProcess) Command() string { return p.line }

// Stdout returns the standard output retained so far.
func (p *bgProcess) Stdout() string { return p.out.stdout.String() }

// Stderr returns the standard error retained so far.
func (p *bgProcess) Stderr() string { return p.out.stderr.String() }

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

func (p *bgProcess) exitedError(code int, known bool) error {
	return &exitedError{pid: p.pid, code: code, known: known}
}

// SendStdin writes data to the process's standard input. With the agentbox
// stdin extension the bytes arrive exactly; a plain Daytona daemon appends
// a newline when data lacks one. It fails with an error matching
// sandbox.ErrExited once the process has exited.
func (p *bgProcess) SendStdin(ctx context.Context, data []byte) error {
	if code, ok := p.ExitCode(); ok {
		return p.exitedError(code, true)
	}
	err := p.m.client.SendInput(ctx, p.sid, p.cid, data)
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
			if code, ok := p.ExitCode(); ok {
				return p.exitedError(code, true)
			}
		case <-t.C:
		case <-ctx.Done():
		}
		return p.exitedError(0, false)
	}
	return fmt.Errorf("process %s: %w", p.pid, p.m.fail("sending input", err))
}

// CloseStdin closes the process's standard input so that readers see EOF.
// It needs the agentbox stdin extension and fails with an error matching
// sandbox.ErrUnsupported against a plain Daytona daemon. Closing the input
// of a process that has exited does nothing.
func (p *bgProcess) CloseStdin(ctx context.Context) error {
	if _, ok := p.ExitCode(); ok {
		return nil
	}
	err := p.m.client.CloseInput(ctx, p.sid, p.cid)
	if err == nil || errors.Is(err, sandbox.ErrExited) || errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if errors.Is(err, sandbox.ErrUnsupported) {
		return fmt.Errorf("process %s: closing stdin: %w", p.pid, err)
	}
	return fmt.Errorf("process %s: %w", p.pid, p.m.fail("closing stdin", err))
}

// Kill deletes the process's session, which kills the process and every
// process it started and makes the sandbox forget it, and waits for it to
// end. Wait then reports exit code 137 and Killed. Kill reports false if
// the process had already exited (or another Kill got there first).
func (p *bgProcess) Kill(ctx context.Context) (bool, error) {
	p.mu.Lock()
	if p.exited || p.killing {
		p.mu.Unlock()
		return false, nil
	}
	p.killing = true
	p.mu.Unlock()

	err := p.m.client.DeleteSession(ctx, p.sid)
	ok := err == nil || errors.Is(err, sandbox.ErrNotFound)
	p.mu.Lock()
	released := p.released
	switch {
	case !released:
		p.deleted = ok
	case ok:
		// Nobody follows the process any more: record the kill here.
		res := result(p.line, sandbox.ExitKilled, p.out, time.Since(p.start))
		res.Killed = true
		p.setResult(res, nil)
	default:
		p.killing = false // a later Kill may try again
	}
	p.mu.Unlock()
	if released {
		if !ok {
			return false, fmt.Errorf("process %s: %w", p.pid, p.m.fail("killing", err))
		}
		return true, nil
	}
	close(p.killDone)
	p.cancel(nil)
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
// Cancelling ctx ends the waiting only. After Close or Detach of the
// Manager it fails with an error matching ErrDetached, unless the process
// had exited.
func (p *bgProcess) Wait(ctx context.Context) (*sandbox.CommandResult, error) {
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
func (p *bgProcess) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.exited
}

// waitGoroutines waits until the process's goroutines have ended.
func (p *bgProcess) waitGoroutines(ctx context.Context) error {
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
