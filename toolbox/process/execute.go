package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/utf8cut"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// plan is a validated command, ready to run.
type plan struct {
	line    string        // the full command line (what results report)
	script  string        // the session command for a Daytona session shell (buildScript)
	fresh   string        // the same for agentbox's toolbox server (buildFresh)
	timeout time.Duration // <= 0: none
	retain  int64         // bytes retained per stream, < 0: all
	waiter  bool          // startAsync noted the exit code for a waiter (waiter.go)
	rtt     time.Duration // how long startAsync's exec took: about one round trip
}

// prepare validates opts, starts the sandbox if needed and builds the
// session command. stdinNull redirects the command's stdin from /dev/null.
func (m *Manager) prepare(ctx context.Context, line string, opts *sandbox.ExecOptions, defRetain int64, stdinNull bool) (*plan, error) {
	if strings.TrimSpace(line) == "" {
		return nil, fmt.Errorf("process: %w: the command is empty; pass a shell command line", sandbox.ErrInvalidArgument)
	}
	retain, err := retention(opts.MaxRetainedBytes, defRetain)
	if err != nil {
		return nil, err
	}
	var env map[string]string
	if m.host != nil {
		env, err = m.host.MergeEnv(opts.Env)
	} else {
		env, err = opts.Env, sandbox.ValidateEnv(opts.Env)
	}
	if err != nil {
		return nil, err
	}
	cwd := opts.Cwd
	if cwd == "" {
		cwd = m.defaultCwd
	}
	script, err := buildScript(line, env, cwd, stdinNull)
	if err != nil {
		return nil, err
	}
	fresh, _ := buildFresh(line, env, cwd, stdinNull)
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = m.defaultTimeout
	}
	if m.host != nil {
		if err := m.host.EnsureRunning(ctx); err != nil {
			return nil, err
		}
	}
	return &plan{line: line, script: script, fresh: fresh, timeout: timeout, retain: retain}, nil
}

// retention validates n, a MaxRetainedBytes option: 0 means def.
func retention(n, def int64) (int64, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 && n != sandbox.Unlimited:
		return 0, fmt.Errorf("process: %w: MaxRetainedBytes is %d; use a positive byte count, 0 for the default or sandbox.Unlimited", sandbox.ErrInvalidArgument, n)
	}
	return n, nil
}

// Execute runs command, followed by args each quoted with
// sandbox.ShellQuote, and waits for it. A command that runs and fails is
// not an error: the result has a non-zero ExitCode.
//
// Options are validated before anything runs. On timeout the command's
// process tree is killed and the result has exit code 124, TimedOut and
// Killed, with "Command timed out after <d>" as stderr when the command
// wrote none. Cancelling ctx kills the command too and returns ctx.Err().
//
// With opts.Stdin set the command reads it; this needs a toolbox server
// with the agentbox "stdin" extension (exact bytes and a real EOF), and
// fails with an error matching sandbox.ErrUnsupported against others (a
// plain Daytona daemon appends newlines and cannot close a command's
// input). Any bytes may be sent. Once the command has ended Execute stops
// copying Stdin and returns, as os/exec does with WaitDelay: a Read that
// blocks (a pipe nobody closes) does not block Execute, though the
// goroutine in it ends only when that Read returns; its result is then
// dropped, and Close waits for it.
//
// If the Stdout or Stderr writer fails, it receives nothing more, the
// command runs on, and Execute returns the result together with an error
// wrapping the writer's. Likewise for a failure to copy Stdin (a read
// error); the command then sees EOF.
func (m *Manager) Execute(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if opts == nil {
		opts = &sandbox.ExecOptions{}
	}
	pl, err := m.prepare(ctx, sandbox.CommandLine(command, args), opts, sandbox.Unlimited, opts.Stdin == nil)
	if err != nil {
		return nil, err
	}
	if opts.Stdin != nil {
		if err := m.requireStdin(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Stdout == nil && opts.Stderr == nil && opts.Stdin == nil {
		return m.executeSync(ctx, pl)
	}
	return m.executeStream(ctx, pl, opts)
}

// requireStdin fails unless the server offers the stdin extension.
func (m *Manager) requireStdin(ctx context.Context) error {
	ext, err := m.client.Extensions(ctx)
	if err != nil {
		return m.fail("asking the server for its extensions", err)
	}
	if !ext.Stdin {
		return fmt.Errorf("process: %w: Stdin needs a toolbox server with the agentbox stdin extension (a plain Daytona daemon cannot deliver exact bytes or close a command's input); pipe the input through the command line instead", sandbox.ErrUnsupported)
	}
	return nil
}

// executeSync runs a command that streams nothing with one synchronous
// session exec.
func (m *Manager) executeSync(ctx context.Context, pl *plan) (*sandbox.CommandResult, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		s, err := m.acquire(ctx)
		if err != nil {
			return nil, err
		}
		req, eo := m.request(ctx, pl)
		s.stateless = eo.Stateless
		if pl.retain > 0 {
			eo.Tail = pl.retain
		}
		rctx, cancel := withTimeout(ctx, pl.timeout)
		res, err := m.client.SessionExecuteWith(rctx, s.id, req, eo)
		timedOut := err != nil && ctx.Err() == nil && rctx.Err() != nil
		cancel()
		switch {
		case err == nil && res.ExitCode != nil:
			// The server drops a stateless command's log once it has
			// sent the answer.
			n := int64(len(res.Stdout)+len(res.Stderr)) + res.StdoutDropped + res.StderrDropped
			m.release(s, kept(s, true, n))
			// The strings are the client's, allocated once at their
			// size: the result takes them as they are.
			r := &sandbox.CommandResult{Command: pl.line, ExitCode: *res.ExitCode, Duration: time.Since(start)}
			r.Stdout, r.StdoutDroppedBytes = runeAligned(res.Stdout, res.StdoutDropped)
			r.Stderr, r.StderrDroppedBytes = runeAligned(res.Stderr, res.StderrDropped)
			return r, nil
		case err == nil:
			m.deleteSession(s.id)
			return nil, m.fail("running a command", errors.New("the server reported no exit code"))
		case timedOut:
			out := m.salvage(s.id, pl.retain, eo.Tether)
			m.deleteSession(s.id)
			return timedOutResult(pl, out, time.Since(start)), nil
		case ctx.Err() != nil:
			m.deleteSession(s.id)
			return nil, ctx.Err()
		case s.pooled && attempt == 0 && errors.Is(err, sandbox.ErrNotFound) && m.goingAway() == "":
			m.stale(s.gen)
			continue
		default:
			m.deleteSession(s.id)
			return nil, m.fail("running a command", err)
		}
	}
}

// request builds the session exec of pl: in the fresh form, and
// stateless, when the server offers the stateless extension (agentbox's
// toolbox server, which runs every command in a fresh shell). The
// extensions are known by then (acquire made or reused a session).
//
// The command is tethered when the server offers it: it dies with this
// process, whatever ends it (see ExtTether).
func (m *Manager) request(ctx context.Context, pl *plan) (toolbox.SessionExecuteRequest, toolbox.SessionExecOptions) {
	ext, err := m.client.Extensions(ctx)
	if err == nil && ext.Stateless {
		return toolbox.SessionExecuteRequest{Command: pl.fresh}, toolbox.SessionExecOptions{Stateless: true, Tether: ext.Tether}
	}
	return toolbox.SessionExecuteRequest{Command: pl.script}, toolbox.SessionExecOptions{Tether: err == nil && ext.Tether}
}

// agentboxServer reports whether the server is agentbox's toolbox server,
// which runs every session command in a fresh shell of its own (it offers
// the stateless extension): commands go in the fresh form there.
func (m *Manager) agentboxServer(ctx context.Context) bool {
	ext, err := m.client.Extensions(ctx)
	return err == nil && ext.Stateless
}

// salvage fetches the output a synchronous command wrote before its
// timeout: the session's command still running, or, when it ran tethered
// (then the server killed it as the request went away, and lists the
// session's commands in order), the session's latest command. Best
// effort.
func (m *Manager) salvage(sid string, retain int64, tethered bool) *streams {
	out := newStreams(retain, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sess, err := m.client.GetSession(ctx, sid)
	if err != nil || len(sess.Commands) == 0 {
		return out
	}
	i := len(sess.Commands) - 1
	for i >= 0 && sess.Commands[i].ExitCode != nil {
		i--
	}
	if i < 0 && tethered {
		i = len(sess.Commands) - 1
	}
	if i >= 0 {
		if stdout, stderr, err := m.client.CommandLogs(ctx, sid, sess.Commands[i].ID); err == nil {
			out.stdout.add(stdout)
			out.stderr.add(stderr)
		}
	}
	return out
}

// startAsync starts pl asynchronously on a session of the pool, replacing
// a vanished pooled session once.
func (m *Manager) startAsync(ctx context.Context, pl *plan) (session, string, error) {
	for attempt := 0; ; attempt++ {
		s, err := m.acquire(ctx)
		if err != nil {
			return session{}, "", err
		}
		req, eo := m.request(ctx, pl)
		s.stateless = eo.Stateless
		if pl.waiter = m.useWaiter(ctx); pl.waiter {
			req.Command = noteExit(req.Command)
		}
		req.RunAsync, req.SuppressInputEcho = true, true
		sent := time.Now()
		res, err := m.client.SessionExecuteWith(ctx, s.id, req, eo)
		pl.rtt = time.Since(sent)
		switch {
		case err == nil && res.CmdID != "":
			return s, res.CmdID, nil
		case err == nil:
			m.deleteSession(s.id)
			return session{}, "", m.fail("starting a command", errors.New("the server returned no command id"))
		case ctx.Err() != nil:
			m.deleteSession(s.id)
			return session{}, "", ctx.Err()
		case s.pooled && attempt == 0 && errors.Is(err, sandbox.ErrNotFound) && m.goingAway() == "":
			m.stale(s.gen)
			continue
		default:
			m.deleteSession(s.id)
			return session{}, "", m.fail("starting a command", err)
		}
	}
}

// follow streams a command's output into out until it ends and returns
// its exit code. killed reports that its session was deleted meanwhile;
// delivered that the server knows the whole log arrived (see
// toolbox.FollowResult).
func (m *Manager) follow(ctx context.Context, sid, cid string, out *streams, exit <-chan int, grace time.Duration) (code int, killed, delivered bool, err error) {
	fr, err := m.client.FollowLogsWith(ctx, sid, cid, out.stdoutWriter(), out.stderrWriter(), toolbox.FollowOptions{Exit: exit, ExitGrace: grace})
	if err != nil || fr.Killed {
		return 0, fr.Killed, false, err
	}
	if fr.ExitCode != nil {
		return *fr.ExitCode, false, fr.Delivered, nil
	}
	code, killed, err = m.exitCode(ctx, sid, cid)
	return code, killed, false, err
}

// kept returns how many of the n output bytes of a command that ended
// normally on s the server keeps: none when it ran stateless and the server
// learned that its output was delivered, which makes it drop the log.
func kept(s session, delivered bool, n int64) int64 {
	if s.stateless && delivered {
		return 0
	}
	return n
}

// exitCode asks the server for the exit code of an ended command. A server
// may record it a moment after the log ends, so a missing code is asked
// again for up to exitCodeWait before giving up with an error.
func (m *Manager) exitCode(ctx context.Context, sid, cid string) (int, bool, error) {
	deadline := time.Now().Add(exitCodeWait)
	delay := 5 * time.Millisecond
	for {
		c, err := m.client.GetCommand(ctx, sid, cid)
		if err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				return 0, true, nil // the session was deleted
			}
			return 0, false, m.fail("getting the exit code", err)
		}
		if c.ExitCode != nil {
			return *c.ExitCode, false, nil
		}
		if time.Now().After(deadline) {
			return 0, false, m.fail("getting the exit code", fmt.Errorf("the server reported none %v after the output ended", exitCodeWait))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, false, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// exitCodeWait bounds how long exitCode waits for a missing exit code.
const exitCodeWait = 3 * time.Second

// executeStream runs a command whose output streams to the caller's
// writers or whose input comes from opts.Stdin.
func (m *Manager) executeStream(ctx context.Context, pl *plan, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	start := time.Now()
	s, cid, err := m.startAsync(ctx, pl)
	if err != nil {
		return nil, err
	}
	out := newStreams(pl.retain, opts.Stdout, opts.Stderr)
	fctx, cancel := withTimeout(ctx, pl.timeout)
	var stdinErr chan error
	if opts.Stdin != nil {
		// The copy stops when the command has ended: a request in flight
		// is cancelled, and a Read that blocks is abandoned (the goroutine
		// ends when it returns; Close waits for that).
		stdinErr = make(chan error, 1)
		m.bg.Go(func() {
			stdinErr <- stdinFailure(m.copyStdin(fctx, s.id, cid, opts.Stdin))
		})
	}
	var exit <-chan int
	if pl.waiter {
		exit = m.startWaiter(fctx, s.id)
	}
	code, killed, delivered, err := m.follow(fctx, s.id, cid, out, exit, waiterGrace+pl.rtt)
	timedOut := err != nil && ctx.Err() == nil && fctx.Err() != nil
	var serr error
	if stdinErr != nil {
		// Like os/exec's WaitDelay: give a copy that is about to finish
		// a moment, then stop it.
		t := time.NewTimer(stdinWaitDelay)
		select {
		case serr = <-stdinErr:
		case <-t.C:
		}
		t.Stop()
	}
	cancel()
	ioErr := errors.Join(serr, out.l.failure())
	switch {
	case err == nil && !killed:
		m.release(s, kept(s, delivered, out.total()))
		return result(pl.line, code, out, time.Since(start)), ioErr
	case err == nil && m.goingAway() != "":
		return nil, m.fail("running a command", errors.New("the command was killed with its session"))
	case err == nil: // someone deleted the session (Close)
		r := result(pl.line, sandbox.ExitKilled, out, time.Since(start))
		r.Killed = true
		return r, ioErr
	case timedOut:
		m.deleteSession(s.id)
		return timedOutResult(pl, out, time.Since(start)), ioErr
	case ctx.Err() != nil:
		m.deleteSession(s.id)
		return nil, ctx.Err()
	default:
		m.deleteSession(s.id)
		return nil, m.fail("following a command's output", err)
	}
}

// stdinWaitDelay is how long Execute waits, once the command has ended,
// for the copying of opts.Stdin to finish by itself.
const stdinWaitDelay = 50 * time.Millisecond

// stdinChunk is the most bytes sent per input request.
const stdinChunk = 256 << 10

// copyStdin sends r to the command's stdin as it is read and closes it at
// EOF (or at a read error, as os/exec does). With the stdin extension any
// bytes go through; otherwise input travels as JSON strings, so it must be
// UTF-8, and chunks are cut on rune boundaries. A command that ends first
// makes the next request fail, which ends the copy; so does ctx. It
// returns the first error.
func (m *Manager) copyStdin(ctx context.Context, sid, cid string, r io.Reader) error {
	ext, err := m.client.Extensions(ctx)
	if err != nil {
		return err
	}
	buf := make([]byte, stdinChunk)
	carry := 0
	for {
		n, rerr := r.Read(buf[carry:])
		if ctx.Err() != nil {
			return ctx.Err() // the command ended while we waited for input
		}
		n += carry
		send := n
		if rerr == nil && !ext.Stdin {
			send = utf8cut.Complete(buf[:n])
		}
		if send > 0 {
			if err := m.sendInput(ctx, sid, cid, buf[:send]); err != nil {
				m.client.CloseInput(ctx, sid, cid) // the command sees EOF
				return err
			}
		}
		carry = copy(buf, buf[send:n])
		if rerr != nil {
			cerr := m.client.CloseInput(ctx, sid, cid)
			if rerr == io.EOF {
				return cerr
			}
			return rerr
		}
	}
}

// sendInput sends one chunk of input. A server may refuse input for a
// command that has not started yet (409, it queues only a little); the
// chunk is then sent again until the command starts or ctx ends.
func (m *Manager) sendInput(ctx context.Context, sid, cid string, data []byte) error {
	delay := 5 * time.Millisecond
	for {
		err := m.client.SendInput(ctx, sid, cid, data)
		var ae *toolbox.APIError
		if err == nil || !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// stdinFailure turns the error of copyStdin into one worth reporting:
// none when the command simply ended before reading all of its input.
func stdinFailure(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sandbox.ErrExited) || errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	// (A command that closed its stdin, EPIPE, which os/exec ignores too,
	// is reported by the agentbox daemon as 410 Gone: sandbox.ErrExited.)
	return fmt.Errorf("process: copying stdin: %w", err)
}

// withTimeout is context.WithTimeout for d > 0 and context.WithCancel
// otherwise (no timeout).
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// result is the result of a command whose output out has received: it
// finishes out's streams, which then hold their final strings.
func result(line string, code int, out *streams, d time.Duration) *sandbox.CommandResult {
	r := &sandbox.CommandResult{Command: line, ExitCode: code, Duration: d}
	r.Stdout, r.StdoutDroppedBytes = out.stdout.finish()
	r.Stderr, r.StderrDroppedBytes = out.stderr.finish()
	return r
}

func timedOutResult(pl *plan, out *streams, d time.Duration) *sandbox.CommandResult {
	r := result(pl.line, sandbox.ExitTimedOut, out, d)
	r.TimedOut, r.Killed = true, true
	if r.Stderr == "" {
		r.Stderr = "Command timed out after " + pl.timeout.String()
	}
	return r
}
