package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// fakeEngine is an Engine whose sandboxes run commands unisolated on the
// host with os/exec. Its state lives in memory, shared by every Run of a
// test, the way the local engine's lives in the state dir.
type fakeEngine struct {
	t          testing.TB
	defaultDir string

	mu        sync.Mutex
	sandboxes map[string]*fakeState // by stateDir + "\x00" + id
	opened    []OpenOptions
	openErr   error // Open fails with it when set
	listErr   error // List fails with it when set
	open      int   // handles not yet closed
}

type fakeState struct {
	info     sandbox.Info
	blockNet bool
	sessions map[string]*fakeSession
}

type fakeSession struct {
	cmds []*fakeCmd
}

type fakeCmd struct {
	id, line       string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer // guarded by fakeEngine.mu
	exit           *int
	done           chan struct{}
}

func newFakeEngine(t testing.TB) *fakeEngine {
	e := &fakeEngine{t: t, defaultDir: t.TempDir(), sandboxes: map[string]*fakeState{}}
	t.Cleanup(func() {
		e.mu.Lock()
		var all []*fakeSession
		for _, st := range e.sandboxes {
			for _, s := range st.sessions {
				all = append(all, s)
			}
		}
		open := e.open
		e.mu.Unlock()
		for _, s := range all {
			killSession(s)
		}
		if open != 0 {
			t.Errorf("%d sandbox handles were not closed", open)
		}
	})
	return e
}

func key(stateDir, id string) string { return stateDir + "\x00" + id }

func (e *fakeEngine) DefaultStateDir() string { return e.defaultDir }

func (e *fakeEngine) Open(_ context.Context, opts OpenOptions) (Box, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.openErr != nil {
		return nil, e.openErr
	}
	e.opened = append(e.opened, opts)
	e.open++
	return &fakeBox{e: e, opts: opts}, nil
}

func (e *fakeEngine) List(_ context.Context, stateDir string) ([]sandbox.Info, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listErr != nil {
		return nil, e.listErr
	}
	var out []sandbox.Info
	for k, st := range e.sandboxes {
		if k[:len(stateDir)] == stateDir && k[len(stateDir)] == 0 {
			out = append(out, st.info)
		}
	}
	return out, nil
}

func (e *fakeEngine) Lookup(_ context.Context, stateDir, id string) (*sandbox.Info, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.sandboxes[key(stateDir, id)]
	if !ok {
		return nil, fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	in := st.info
	return &in, nil
}

func (e *fakeEngine) Remove(ctx context.Context, stateDir, id string) error {
	if err := e.StopByID(ctx, stateDir, id); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.sandboxes, key(stateDir, id))
	e.mu.Unlock()
	return nil
}

func (e *fakeEngine) StopByID(_ context.Context, stateDir, id string) error {
	e.mu.Lock()
	st, ok := e.sandboxes[key(stateDir, id)]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	sessions := st.sessions
	st.sessions = map[string]*fakeSession{}
	st.info.Status = sandbox.StatusStopped
	e.mu.Unlock()
	for _, s := range sessions {
		killSession(s)
	}
	return nil
}

// state returns the state of a sandbox, or nil.
func (e *fakeEngine) state(stateDir, id string) *fakeState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sandboxes[key(stateDir, id)]
}

// fakeBox is an opened fake sandbox.
type fakeBox struct {
	e      *fakeEngine
	opts   OpenOptions
	closed bool
}

func (b *fakeBox) ID() string                        { return b.opts.ID }
func (b *fakeBox) Name() string                      { return "FakeSandbox" }
func (b *fakeBox) Provider() string                  { return "fake" }
func (b *fakeBox) Instructions() string              { return "" }
func (b *fakeBox) Processes() sandbox.ProcessManager { return nil }

func (b *fakeBox) Status() sandbox.Status {
	if st := b.e.state(b.opts.StateDir, b.opts.ID); st != nil {
		return st.info.Status
	}
	return sandbox.StatusPending
}

func (b *fakeBox) Start(context.Context) (sandbox.Outcome, error) {
	b.e.mu.Lock()
	defer b.e.mu.Unlock()
	st, ok := b.e.sandboxes[key(b.opts.StateDir, b.opts.ID)]
	if ok && st.info.Status == sandbox.StatusRunning {
		return sandbox.OutcomeConnected, nil
	}
	if !ok {
		now := time.Now()
		st = &fakeState{
			info:     sandbox.Info{ID: b.opts.ID, Name: b.opts.ID, Provider: "fake", CreatedAt: now, LastUsedAt: now, Metadata: map[string]string{"k": "v"}},
			blockNet: b.opts.NetworkBlockAll,
			sessions: map[string]*fakeSession{},
		}
		b.e.sandboxes[key(b.opts.StateDir, b.opts.ID)] = st
	}
	st.info.Status = sandbox.StatusRunning
	return sandbox.OutcomeCreated, nil
}

func (b *fakeBox) Stop(ctx context.Context) error {
	return b.e.StopByID(ctx, b.opts.StateDir, b.opts.ID)
}

func (b *fakeBox) Destroy(ctx context.Context) error {
	return b.e.Remove(ctx, b.opts.StateDir, b.opts.ID)
}

func (b *fakeBox) Info(ctx context.Context) (*sandbox.Info, error) {
	return b.e.Lookup(ctx, b.opts.StateDir, b.opts.ID)
}

func (b *fakeBox) Close(context.Context) error {
	b.e.mu.Lock()
	defer b.e.mu.Unlock()
	if b.closed {
		b.e.t.Errorf("sandbox handle %q closed twice", b.opts.ID)
	}
	b.closed = true
	b.e.open--
	return nil
}

func (b *fakeBox) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if opts == nil {
		opts = &sandbox.ExecOptions{}
	}
	if err := sandbox.ValidateEnv(opts.Env); err != nil {
		return nil, err
	}
	if _, err := b.Start(ctx); err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = sandbox.DefaultTimeout
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	line := sandbox.CommandLine(command, args)
	var stdout, stderr bytes.Buffer
	cmd := hostCommand(runCtx, line)
	cmd.Dir = opts.Cwd
	for k, v := range opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = opts.Stdin
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if opts.Stdout != nil {
		cmd.Stdout = io.MultiWriter(&stdout, opts.Stdout)
	}
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, opts.Stderr)
	}
	start := time.Now()
	err := cmd.Run()
	res := &sandbox.CommandResult{Command: line, Stdout: stdout.String(), Stderr: stderr.String(), Duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case runCtx.Err() != nil:
		res.ExitCode, res.TimedOut, res.Killed = sandbox.ExitTimedOut, true, true
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return nil, err
	}
	return res, nil
}

// hostCommand runs line with sh in its own process group, killed whole.
func hostCommand(ctx context.Context, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd
}

func (b *fakeBox) Sessions() (Sessions, error) {
	if b.Status() != sandbox.StatusRunning {
		return nil, sandbox.ErrNotReady
	}
	return &fakeSessions{b: b}, nil
}

// fakeSessions implements Sessions over a fake sandbox.
type fakeSessions struct{ b *fakeBox }

func (f *fakeSessions) sessions() (map[string]*fakeSession, error) {
	st := f.b.e.sandboxes[key(f.b.opts.StateDir, f.b.opts.ID)]
	if st == nil || st.info.Status != sandbox.StatusRunning {
		return nil, sandbox.ErrNotReady
	}
	return st.sessions, nil
}

func (f *fakeSessions) ListSessions(context.Context) ([]toolbox.Session, error) {
	f.b.e.mu.Lock()
	defer f.b.e.mu.Unlock()
	m, err := f.sessions()
	if err != nil {
		return nil, err
	}
	out := []toolbox.Session{}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, describe(id, m[id]))
	}
	return out, nil
}

func describe(id string, s *fakeSession) toolbox.Session {
	out := toolbox.Session{SessionID: id, Commands: []toolbox.Command{}}
	for _, c := range s.cmds {
		out.Commands = append(out.Commands, toolbox.Command{ID: c.id, Command: c.line, ExitCode: c.exit})
	}
	return out
}

func (f *fakeSessions) GetSession(_ context.Context, id string) (*toolbox.Session, error) {
	f.b.e.mu.Lock()
	defer f.b.e.mu.Unlock()
	m, err := f.sessions()
	if err != nil {
		return nil, err
	}
	s, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, sandbox.ErrNotFound)
	}
	d := describe(id, s)
	return &d, nil
}

func (f *fakeSessions) CreateSession(_ context.Context, id string) error {
	f.b.e.mu.Lock()
	defer f.b.e.mu.Unlock()
	m, err := f.sessions()
	if err != nil {
		return err
	}
	if _, ok := m[id]; ok {
		return fmt.Errorf("session %s already exists", id)
	}
	m[id] = &fakeSession{}
	return nil
}

func (f *fakeSessions) DeleteSession(_ context.Context, id string) error {
	f.b.e.mu.Lock()
	m, err := f.sessions()
	if err != nil {
		f.b.e.mu.Unlock()
		return err
	}
	s, ok := m[id]
	delete(m, id)
	f.b.e.mu.Unlock()
	if !ok {
		return fmt.Errorf("session %s: %w", id, sandbox.ErrNotFound)
	}
	killSession(s)
	return nil
}

func killSession(s *fakeSession) {
	for _, c := range s.cmds {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// lockedWriter appends to a buffer under the engine's lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (f *fakeSessions) ExecuteAsync(_ context.Context, sid, line string) (string, error) {
	e := f.b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	m, err := f.sessions()
	if err != nil {
		return "", err
	}
	s, ok := m[sid]
	if !ok {
		return "", fmt.Errorf("session %s: %w", sid, sandbox.ErrNotFound)
	}
	c := &fakeCmd{id: fmt.Sprintf("cmd-%d", len(s.cmds)+1), line: line, done: make(chan struct{})}
	c.cmd = hostCommand(context.Background(), line)
	c.cmd.Stdout = lockedWriter{&e.mu, &c.stdout}
	c.cmd.Stderr = lockedWriter{&e.mu, &c.stderr}
	if err := c.cmd.Start(); err != nil {
		return "", err
	}
	s.cmds = append(s.cmds, c)
	go func() {
		defer close(c.done)
		err := c.cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if code < 0 {
				code = sandbox.ExitKilled
			}
		}
		e.mu.Lock()
		c.exit = &code
		e.mu.Unlock()
	}()
	return c.id, nil
}

func (f *fakeSessions) CommandLogs(_ context.Context, sid, cid string) ([]byte, []byte, error) {
	f.b.e.mu.Lock()
	defer f.b.e.mu.Unlock()
	m, err := f.sessions()
	if err != nil {
		return nil, nil, err
	}
	s, ok := m[sid]
	if !ok {
		return nil, nil, fmt.Errorf("session %s: %w", sid, sandbox.ErrNotFound)
	}
	for _, c := range s.cmds {
		if c.id == cid {
			return bytes.Clone(c.stdout.Bytes()), bytes.Clone(c.stderr.Bytes()), nil
		}
	}
	return nil, nil, fmt.Errorf("command %s: %w", cid, sandbox.ErrNotFound)
}
