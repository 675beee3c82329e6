package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// maxAllocAttempts bounds the session creations of one Spawn racing other
// spawns for the next id.
const maxAllocAttempts = 32

// Spawn starts command (a shell line, not quoted) in the background and
// returns at once. ctx bounds only the start: use Kill to end the process.
//
// The process gets the next id of the sandbox ("1", "2", …): Spawn lists
// the sessions, creates the session SessionPrefix+"bg-"+id (trying the
// next id when a concurrent spawn, through any handle, took it) and starts
// the command in it. The session holds the process for as long as the
// sandbox knows it, so that any Manager of the sandbox can reattach to it.
//
// opts.Stdout and opts.Stderr, when set, receive all of the process's
// output as it arrives. Each stream retains opts.MaxRetainedBytes (default
// 1 MiB). The timeout (opts.Timeout, else the Manager's default) counts
// from the start; on expiry the process tree is killed and Wait reports
// exit code 124, TimedOut and Killed. With opts.Stdin set (which needs the
// agentbox stdin extension, see Execute) it is copied to the process and
// its stdin closed at EOF; otherwise stdin stays open for SendStdin until
// CloseStdin.
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
	n, err := m.allocate(ctx)
	if err != nil {
		return nil, err
	}
	sid := m.bgSession(n)
	// Not stateless: the server must keep the log for other handles.
	script := pl.script
	if m.agentboxServer(ctx) {
		script = pl.fresh
	}
	res, err := m.client.SessionExecute(ctx, sid, toolbox.SessionExecuteRequest{Command: script, RunAsync: true, SuppressInputEcho: true})
	if err == nil && res.CmdID == "" {
		err = errors.New("the server returned no command id")
	}
	if err != nil {
		m.deleteSession(sid)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, m.fail("starting a command", err)
	}
	p := newBgProcess(m, strconv.Itoa(n), pl.line, sid, res.CmdID, newStreams(pl.retain, opts.Stdout, opts.Stderr))
	p.owned, p.timeout, p.start = true, pl.timeout, start
	if opts.Stdin != nil {
		p.stdinDone = make(chan struct{})
	}
	m.mu.Lock()
	m.procs[p.pid] = p
	m.mu.Unlock()
	fctx := p.follow(ctx)
	if opts.Stdin != nil {
		go func() {
			defer close(p.stdinDone)
			m.copyStdin(fctx, sid, res.CmdID, opts.Stdin)
		}()
	}
	return p, nil
}

// allocate creates the session of a new background process and returns
// the process's id: one above the highest id of the sandbox's sessions.
// When a concurrent spawn took that id first, it tries the next one.
func (m *Manager) allocate(ctx context.Context) (int, error) {
	next := 1
	var lastErr error
	for range maxAllocAttempts {
		list, err := m.client.ListSessions(ctx)
		if err != nil {
			return 0, m.requestError(ctx, "listing sessions", err)
		}
		for _, s := range list {
			if n, ok := m.bgID(s.SessionID); ok && n >= next {
				next = n + 1
			}
		}
		err = m.client.CreateSession(ctx, m.bgSession(next))
		if err == nil {
			return next, nil
		}
		if !m.taken(ctx, next, err) {
			return 0, m.requestError(ctx, "creating a session", err)
		}
		lastErr = err
		next++
	}
	return 0, fmt.Errorf("process: gave up on creating a session after %d attempts racing other spawns for the next id: %w", maxAllocAttempts, lastErr)
}

// taken reports whether the creation of process n's session failed because
// the session exists: a concurrent spawn took n.
func (m *Manager) taken(ctx context.Context, n int, err error) bool {
	var ae *toolbox.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusConflict {
		return true
	}
	_, gerr := m.client.GetSession(ctx, m.bgSession(n))
	return gerr == nil
}

// requestError is the error of a failed request: ctx's when it is done.
func (m *Manager) requestError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return m.fail(op, err)
}

// bgSession names the session of background process n.
func (m *Manager) bgSession(n int) string { return m.prefix + "bg-" + strconv.Itoa(n) }

// bgID returns the id of the background process a session holds.
func (m *Manager) bgID(sessionID string) (int, bool) {
	rest, ok := strings.CutPrefix(sessionID, m.prefix+"bg-")
	if !ok {
		return 0, false
	}
	return parsePID(rest)
}

// parsePID reads a process id: a positive decimal number, written as
// strconv.Itoa writes it.
func parsePID(pid string) (int, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || strconv.Itoa(n) != pid {
		return 0, false
	}
	return n, true
}

// List describes every background process the sandbox knows, whichever
// Manager spawned it, in id order: one request (plus one per session
// against a server that lists sessions without their commands).
func (m *Manager) List(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return nil, err
	}
	list, err := m.client.ListSessions(ctx)
	if err != nil {
		return nil, m.requestError(ctx, "listing sessions", err)
	}
	type entry struct {
		n    int
		info sandbox.ProcessInfo
	}
	var entries []entry
	for _, s := range list {
		n, ok := m.bgID(s.SessionID)
		if !ok {
			continue
		}
		if s.Commands == nil {
			full, err := m.client.GetSession(ctx, s.SessionID)
			if errors.Is(err, sandbox.ErrNotFound) {
				continue // forgotten meanwhile
			}
			if err != nil {
				return nil, m.requestError(ctx, "describing a session", err)
			}
			s = *full
		}
		if len(s.Commands) == 0 {
			continue // being spawned
		}
		c := s.Commands[0]
		info := sandbox.ProcessInfo{PID: strconv.Itoa(n), Command: commandLine(c.Command), Running: c.ExitCode == nil}
		if c.ExitCode != nil {
			code := *c.ExitCode
			info.ExitCode = &code
		}
		entries = append(entries, entry{n, info})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.n, b.n) })
	infos := make([]sandbox.ProcessInfo, len(entries))
	for i, e := range entries {
		infos[i] = e.info
	}
	return infos, nil
}

// Get returns the process pid: the value this Manager tracks (Spawn's, or
// an earlier Get's), else a new value reattached to the process (see
// Attach), tracked from then on. A process that has exited is returned
// once more and then forgotten: untracked and its session deleted. It
// fails with an error matching sandbox.ErrNotFound when the sandbox knows
// no process pid.
func (m *Manager) Get(ctx context.Context, pid string) (sandbox.Process, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return nil, err
	}
	p, held, err := m.current(ctx, pid)
	if err != nil {
		return nil, err
	}
	if p == nil {
		q, err := m.reattach(ctx, pid, nil)
		if err != nil {
			return nil, err
		}
		p, held = m.track(q), true
	}
	if _, exited := p.ExitCode(); exited {
		m.forget(p, held)
	}
	return p, nil
}

// Attach returns a new value reattached to the process pid, whichever
// Manager (in this operating-system process or another) spawned it. When
// the process has exited, Attach replays its whole output (one log follow);
// when it runs, Attach reads its output so far (one request) and a
// goroutine follows the rest until the process ends or the Manager is
// closed or detached. The value has no timeout, and its Wait reports the
// time since Attach as Duration. Attach never forgets a process. It fails
// with an error matching sandbox.ErrNotFound when the sandbox knows no
// process pid.
func (m *Manager) Attach(ctx context.Context, pid string, opts *sandbox.AttachOptions) (sandbox.Process, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return nil, err
	}
	return m.reattach(ctx, pid, opts)
}

// reattach makes a value following process pid.
func (m *Manager) reattach(ctx context.Context, pid string, opts *sandbox.AttachOptions) (*bgProcess, error) {
	if opts == nil {
		opts = &sandbox.AttachOptions{}
	}
	retain, err := retention(opts.MaxRetainedBytes, DefaultSpawnRetainedBytes)
	if err != nil {
		return nil, err
	}
	n, ok := parsePID(pid)
	if !ok {
		return nil, notFound(pid)
	}
	sid := m.bgSession(n)
	s, err := m.client.GetSession(ctx, sid)
	if errors.Is(err, sandbox.ErrNotFound) || err == nil && len(s.Commands) == 0 {
		return nil, notFound(pid)
	}
	if err != nil {
		return nil, m.requestError(ctx, "describing a session", err)
	}
	c := s.Commands[0]
	p := newBgProcess(m, pid, commandLine(c.Command), sid, c.ID, newStreams(retain, opts.Stdout, opts.Stderr))
	if c.ExitCode != nil {
		code, killed, _, err := m.follow(ctx, sid, c.ID, p.out, nil, 0)
		if err == nil && killed {
			return nil, notFound(pid) // forgotten meanwhile
		}
		if err != nil {
			return nil, m.requestError(ctx, "reading the output", err)
		}
		p.finished(code)
		return p, nil
	}
	stdout, stderr, err := m.client.CommandLogs(ctx, sid, c.ID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, notFound(pid)
	}
	if err != nil {
		return nil, m.requestError(ctx, "reading the output", err)
	}
	p.out.stdoutWriter().Write(stdout)
	p.out.stderrWriter().Write(stderr)
	p.out.skip = [2]int64{int64(len(stdout)), int64(len(stderr))}
	p.follow(ctx)
	return p, nil
}

// notFound is the error for an unknown process id.
func notFound(pid string) error {
	return fmt.Errorf("process %q: %w (it never existed, or it was killed, or it exited and was already fetched)", pid, sandbox.ErrNotFound)
}

// Kill ends process pid and its whole tree, waits for it, and forgets it.
// It reports false when pid is unknown or had already exited (an exited
// process is forgotten too). A process this Manager does not track costs
// two requests: one to describe its session, one to delete it.
func (m *Manager) Kill(ctx context.Context, pid string) (bool, error) {
	if err := m.ensureRunning(ctx); err != nil {
		return false, err
	}
	p, held, err := m.current(ctx, pid)
	if err != nil {
		return false, err
	}
	if p != nil {
		killed, err := p.Kill(ctx)
		m.forget(p, held && !killed)
		return killed, err
	}
	n, ok := parsePID(pid)
	if !ok {
		return false, nil
	}
	sid := m.bgSession(n)
	s, err := m.client.GetSession(ctx, sid)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, m.requestError(ctx, "describing a session", err)
	}
	err = m.client.DeleteSession(ctx, sid)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, m.requestError(ctx, "deleting a session", err)
	}
	running := len(s.Commands) > 0 && s.Commands[0].ExitCode == nil
	return running && err == nil, nil
}

// current returns the value this Manager tracks for pid, if it still
// stands for the sandbox's process pid, and whether the sandbox still
// holds that process (forgetting it then deletes its session). A tracked
// value whose process exited may be stale: another handle made the sandbox
// forget it, and a new process took its id. current untracks such a value
// and returns nil. Checking costs a request, for exited values only.
func (m *Manager) current(ctx context.Context, pid string) (p *bgProcess, held bool, err error) {
	p = m.lookup(pid)
	if p == nil {
		return nil, false, nil
	}
	if _, exited := p.ExitCode(); !exited {
		return p, true, nil
	}
	// Asked even when this Manager deleted the session: the id was free
	// from then on, and a later spawn (of any handle) may have taken it.
	switch st, err := m.sessionOf(ctx, p); {
	case err != nil:
		return nil, false, err
	case st == sessionReused:
		m.untrack(p) // stale: the id is another process's now
		return nil, false, nil
	default:
		return p, st == sessionHeld, nil
	}
}

// What a process's session holds now.
const (
	sessionGone   = iota // deleted: the sandbox forgot the process
	sessionHeld          // still the process
	sessionReused        // another process, which took the id
)

// sessionOf tells what p's session holds now.
func (m *Manager) sessionOf(ctx context.Context, p *bgProcess) (int, error) {
	s, err := m.client.GetSession(ctx, p.sid)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return sessionGone, nil
	case err != nil:
		return 0, m.requestError(ctx, "describing a session", err)
	case len(s.Commands) > 0 && s.Commands[0].ID == p.cid:
		return sessionHeld, nil
	}
	return sessionReused, nil
}

// untrack stops tracking p (not a newer value of its pid).
func (m *Manager) untrack(p *bgProcess) {
	m.mu.Lock()
	if m.procs[p.pid] == p {
		delete(m.procs, p.pid)
	}
	m.mu.Unlock()
}

// forget untracks p and, when the sandbox holds its process, deletes its
// session, so that the sandbox forgets the process. Best effort.
func (m *Manager) forget(p *bgProcess, held bool) {
	m.untrack(p)
	if held {
		m.deleteSession(p.sid)
	}
}

func (m *Manager) ensureRunning(ctx context.Context) error {
	if m.host == nil {
		return nil
	}
	return m.host.EnsureRunning(ctx)
}

func (m *Manager) lookup(pid string) *bgProcess {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.procs[pid]
}

// track makes p the tracked value of its process, unless a concurrent Get
// tracked another first: then p is released and that one returned.
func (m *Manager) track(p *bgProcess) *bgProcess {
	m.mu.Lock()
	q, ok := m.procs[p.pid]
	if !ok {
		m.procs[p.pid] = p
	}
	m.mu.Unlock()
	if ok {
		p.release()
		return q
	}
	return p
}
