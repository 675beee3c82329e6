package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/process"
)

// Sandbox is a local sandbox: commands run isolated on this machine under
// an init that serves the toolbox API on a unix socket in the sandbox's
// state folder. It implements [sandbox.Sandbox]. Create it with [New]; the
// first command, or Start, starts it. [Open] returns the handle of an
// existing sandbox: every operation on one sandbox is a method.
type Sandbox struct {
	*sandbox.Lifecycle
	// opts are the normalized options of New. opts.Config is guarded by mu:
	// it becomes the sandbox's own Config when a start finds the sandbox
	// (adopt); the other fields never change.
	opts   Options
	set    []int // the fields of opts.Config New's caller set (setFields)
	dir    string
	client *toolbox.Client
	mgr    *process.Manager

	transport *http.Transport // our own transport when the socket path is long, else nil

	egressTest egressTestHooks // tests only (export_test.go)
	netTest    netTestHooks    // tests only (export_test.go)

	mu       sync.Mutex
	started  bool            // this object acquired the sandbox at least once
	proxyEnv bool            // the running init has the egress proxy's variables (meta.ProxyEnv)
	waits    []chan struct{} // reapers of inits this process started
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New returns a pending sandbox configured by opts. It only validates; the
// sandbox starts on Start or on the first command. Starting a sandbox whose
// id exists in the state dir connects to it or restarts it with its files,
// and reports [sandbox.OutcomeConnected] either way (only a sandbox new to
// the state dir is [sandbox.OutcomeCreated], as with Mastra's Daytona);
// such a sandbox keeps the [Config] it was created with, as a Daytona
// sandbox does, while Env, Timeout and Hooks are this object's. A field of
// opts.Config left at its zero value takes the sandbox's own value; one set
// to another value than the sandbox's makes Start fail with a
// [*ConfigMismatchError] (see [Options]).
//
// Resources asked for a new sandbox that this host cannot enforce, or
// that exceed its means, make New fail (see [Resources]).
//
// On systems other than Linux New validates opts, then fails with an error
// matching [sandbox.ErrIsolationUnavailable]: local sandboxes need Linux.
func New(opts Options) (*Sandbox, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if err := checkPlatform(runtime.GOOS); err != nil {
		return nil, err
	}
	// Limits asked for a new sandbox must be within this host's means; an
	// existing sandbox's are its own (checkConfig).
	if _, err := os.Stat(filepath.Join(sandboxDir(o.StateDir, o.ID), metaFile)); errors.Is(err, fs.ErrNotExist) {
		if err := checkResources(o.Config.Resources, o.StateDir, o.DiskBudgetMB); err != nil {
			return nil, err
		}
	}
	return newSandbox(o, setFields(opts.Config))
}

// newSandbox returns the handle of the sandbox of the normalized options
// o; set are the fields of o.Config its caller set (setFields).
func newSandbox(o Options, set []int) (*Sandbox, error) {
	s := &Sandbox{opts: o, set: set, dir: sandboxDir(o.StateDir, o.ID)}
	lc, err := sandbox.NewLifecycle(o.ID, driver{s}, o.Hooks, o.Env)
	if err != nil {
		return nil, err
	}
	s.Lifecycle = lc
	if s.client, s.transport, err = newClient(s.dir); err != nil {
		return nil, err
	}
	s.mgr = process.NewManager(process.Options{
		Client:         s.client,
		Host:           commandHost{s},
		DefaultTimeout: o.Timeout,
		// "" = the init's working directory, which is the one the sandbox
		// was created with even when this object's options differ.
		DefaultCwd: "",
	})
	return s, nil
}

// Name returns "LocalSandbox".
func (s *Sandbox) Name() string { return "LocalSandbox" }

// Provider returns "local".
func (s *Sandbox) Provider() string { return "local" }

// StateDir returns the state dir holding this sandbox.
func (s *Sandbox) StateDir() string { return s.opts.StateDir }

// Client returns the toolbox client talking to the sandbox's init.
func (s *Sandbox) Client() *toolbox.Client { return s.client }

// ExecuteCommand runs command (args quoted with sandbox.ShellQuote) in the
// sandbox, starting it first if needed.
//
// When the sandbox is stopped or removed while the command runs (by
// another handle or process, e.g. Stop of a handle from Open), the command
// is killed and the error matches [sandbox.ErrNotReady] and says so; the result, when
// the command's end was reported, comes with it.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	s.noticeDeath()
	res, err := s.mgr.Execute(ctx, command, args, opts)
	killed := err == nil && res.ExitCode > 128 // by a signal: maybe the init's shutdown
	if (err != nil || killed) && ctx.Err() == nil && s.Status() == sandbox.StatusRunning && s.endedMeanwhile(ctx) {
		s.SetStatus(sandbox.StatusStopped)
		cause := err
		if cause == nil {
			cause = fmt.Errorf("exit code %d", res.ExitCode)
		}
		return res, &sandbox.NotReadyError{ID: s.opts.ID, Err: fmt.Errorf("the sandbox was stopped while the command ran, which killed it: %w", cause)}
	}
	return res, err
}

// stopWait bounds how long endedMeanwhile waits for a stop or removal in
// progress: longer than terminate's grace periods.
const stopWait = 15 * time.Second

// endedMeanwhile reports whether the sandbox's init has ended. A stop or
// removal holds the sandbox's lock until the init has ended: endedMeanwhile
// waits for the lock first, so that it sees the outcome of one in
// progress rather than an init about to end.
func (s *Sandbox) endedMeanwhile(ctx context.Context) bool {
	lctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	if l, err := lockSandbox(lctx, s.opts.StateDir, s.opts.ID, false); err == nil {
		l.unlock()
	}
	_, alive := liveInit(s.dir)
	return !alive
}

// noticeDeath marks a running sandbox whose init has ended (auto-stop, or
// a stop by another process) as stopped, so that the next command starts
// it again.
func (s *Sandbox) noticeDeath() {
	if st := s.Status(); st != sandbox.StatusRunning && st != sandbox.StatusPaused {
		return
	}
	if _, ok := liveInit(s.dir); !ok {
		s.SetStatus(sandbox.StatusStopped)
	}
}

// Processes returns the manager of background processes.
func (s *Sandbox) Processes() sandbox.ProcessManager {
	return s.mgr
}

// Info describes the sandbox. Before the first start it describes the
// configuration.
func (s *Sandbox) Info(ctx context.Context) (*sandbox.Info, error) {
	m, err := readMeta(s.dir)
	if err != nil {
		m = s.newMeta()
	} else {
		// This object's status, unless the init ended behind its back.
		s.noticeDeath()
		if m.alive() && healsEgress(s.dir, &m.Config) {
			s.healEgress(ctx)
		}
	}
	info := infoFrom(s.dir, &m)
	live := info.Status == sandbox.StatusRunning || info.Status == sandbox.StatusPaused
	if st := s.Status(); !live || (st != sandbox.StatusRunning && st != sandbox.StatusPaused) {
		info.Status = st // this object's status, unless paused or resumed by another
	}
	if info.Status != sandbox.StatusRunning && info.Status != sandbox.StatusPaused {
		info.TimeoutAt = time.Time{}
	}
	return info, nil
}

// Instructions describes the sandbox to an agent, truthfully: from the
// configuration the sandbox was created with once it exists, else from
// this object's.
func (s *Sandbox) Instructions() string {
	m, err := readMeta(s.dir)
	if err != nil {
		m = s.newMeta()
	}
	c, ids := m.Config, m.HostIDs
	id, _ := describe(&c, m.RunAs, ids)
	parts := []string{
		fmt.Sprintf("Local sandbox with isolated execution (%s runtime) on this Linux machine.", c.Language),
		fmt.Sprintf("Default working directory: %s.", c.WorkingDirectory),
		fmt.Sprintf("Command timeout: %ds.", int(math.Ceil(s.opts.Timeout.Seconds()))),
		identitySentence(id, m.Root != nil),
	}
	if id.HostUIDCount > 1 {
		parts = append(parts, fmt.Sprintf("On the host, the sandbox's uids 0-%d are uids %d-%d.", id.HostUIDCount-1, id.HostUID, id.HostUID+id.HostUIDCount-1))
	} else if id.HostUIDCount == 1 {
		parts = append(parts, fmt.Sprintf("On the host, uid 0 inside is uid %d, the only uid the sandbox has.", id.HostUID))
	}
	if m.Root != nil && m.Root.Host {
		parts = append(parts, "The root file system is a writable copy of the host's system folders (/usr, /etc): packages may be installed, and changes persist across stop and start and stay in this sandbox.")
	} else if m.Root != nil {
		parts = append(parts, "The root file system is the image's and writable: packages may be installed, and changes persist across stop and start and stay in this sandbox.")
	} else {
		parts = append(parts, "/usr and /etc are the host's, read-only: system packages cannot be installed; put tools under the home folder instead.")
	}
	if c.Ephemeral {
		parts = append(parts, "The sandbox is ephemeral: it and its files are deleted when it stops.")
	} else {
		parts = append(parts, "Files written in the home folder, /tmp and the working directory persist across stop and start.")
	}
	if n := len(c.Volumes); n > 0 {
		var paths []string
		for _, v := range c.Volumes {
			p := v.MountPath
			if v.ReadOnly {
				p += " (read-only)"
			}
			paths = append(paths, p)
		}
		parts = append(parts, fmt.Sprintf("%d volume(s) attached: %s.", n, strings.Join(paths, ", ")))
	}
	parts = append(parts, c.Confinement.instructions(landlockABI()))
	parts = append(parts, networkInstructions(&c))
	if t := secretsInstructions(s.dir, &c); t != "" {
		parts = append(parts, t)
	}
	parts = append(parts, limitsOf(s.dir, &m).instructions())
	return strings.Join(parts, " ")
}

// SetEnv replaces the runtime environment overlay with update(copy of it).
func (s *Sandbox) SetEnv(update func(map[string]string) map[string]string) error {
	return s.Lifecycle.SetEnv(update)
}

// config returns the sandbox's Config: New's until a start finds the
// sandbox, then the sandbox's own.
func (s *Sandbox) config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.Config
}

// newMeta returns the metadata of the sandbox as this object would create
// it now.
func (s *Sandbox) newMeta() meta {
	return meta{ID: s.opts.ID, CreatedAt: time.Now().UTC(), Config: s.config()}
}

// driver implements sandbox.Driver for a Sandbox.
type driver struct{ s *Sandbox }

func (d driver) Acquire(ctx context.Context) (sandbox.Outcome, error) { return d.s.acquire(ctx) }
func (d driver) Release(ctx context.Context) error                    { return d.s.release(ctx) }
func (d driver) Teardown(ctx context.Context) error                   { return d.s.teardown(ctx) }

// prepareStateDir checks the state dir and makes its sandboxes folder,
// which this process must be able to write.
func prepareStateDir(stateDir string) error {
	if err := CheckStateDir(stateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(stateDir, sandboxesDir), 0o700); err != nil {
		return stateDirError(stateDir, err)
	}
	if err := unix.Access(filepath.Join(stateDir, sandboxesDir), unix.W_OK); err != nil {
		return stateDirError(stateDir, err)
	}
	return nil
}

func (s *Sandbox) acquire(ctx context.Context) (sandbox.Outcome, error) {
	stateDir := s.opts.StateDir
	if err := prepareStateDir(stateDir); err != nil {
		return "", err
	}
	l, err := lockSandbox(ctx, stateDir, s.opts.ID, true)
	if err != nil {
		return "", err
	}
	defer l.unlock()

	m, err := readMeta(l.path)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err != nil && !fresh {
		return "", fmt.Errorf("sandbox %q: read metadata: %w", s.opts.ID, err)
	}
	if fresh && leftovers(l.path) {
		// What a create that a crash interrupted left goes first.
		if err := removeLocked(ctx, stateDir, l); err != nil {
			return "", err
		}
		l.unlock()
		return s.acquire(ctx)
	}
	if !fresh {
		if expired(l.path, &m) {
			if err := removeLocked(ctx, stateDir, l); err != nil {
				return "", err
			}
			l.unlock()
			return s.acquire(ctx)
		}
		if err := checkConfig(s.opts.ID, stateDir, s.set, s.config(), m.Config); err != nil {
			return "", err
		}
		s.adopt(&m)
		if m.alive() {
			s.afterStart(false)
			return sandbox.OutcomeConnected, nil
		}
		// Stopped (or its init died): clear leftovers, restart with its files.
		if err := killInit(ctx, l.path, &m); err != nil {
			return "", err
		}
	} else {
		m = s.newMeta()
		if m.Root, err = resolveRoot(ctx, stateDir, s.opts.ID, &m.Config); err != nil {
			_ = removeAll(l.path)
			return "", err
		}
	}

	// Finding the sandbox, running or stopped, is "connected" (as Mastra
	// reports a found Daytona sandbox it restarts); only a new one is
	// "created".
	outcome := sandbox.OutcomeConnected
	if fresh {
		outcome = sandbox.OutcomeCreated
	}
	if err := s.boot(ctx, l.path, &m); err != nil {
		cctx := context.WithoutCancel(ctx)
		_ = killInit(cctx, l.path, &m)
		if fresh {
			// Never leave a half-made sandbox behind.
			if removeAll(l.path) == nil {
				_ = releaseHostIDs(cctx, stateDir, s.opts.ID)
				_ = releaseRoot(stateDir, s.opts.ID, m.Root)
			}
		} else {
			m.Status = sandbox.StatusStopped
			_ = writeMeta(l.path, &m)
		}
		return "", err
	}
	return outcome, nil
}

// adopt takes the Config of an existing sandbox from its metadata: a
// sandbox keeps what it was created with, as a Daytona sandbox does (New's
// caller set no field to another value: checkConfig).
func (s *Sandbox) adopt(m *meta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Config = m.Config
	s.proxyEnv = m.ProxyEnv
}

func (s *Sandbox) afterStart(restarted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started && restarted {
		s.mgr.Reset() // sessions of the previous init are gone
	}
	s.started = true
}

// end closes the process manager, then runs stopOrRemove (stopByID or
// remove) on the sandbox, which may already be gone, and waits for the
// inits this process started.
func (s *Sandbox) end(ctx context.Context, stopOrRemove func(ctx context.Context, stateDir, id string) error) error {
	_ = s.mgr.Close(ctx)
	err := stopOrRemove(ctx, s.opts.StateDir, s.opts.ID)
	if errors.Is(err, sandbox.ErrNotFound) {
		err = nil
	}
	s.waitInits()
	return err
}

func (s *Sandbox) release(ctx context.Context) error {
	err := s.end(ctx, stopByID)
	if err == nil && s.config().Ephemeral {
		s.closeClient()
	}
	return err
}

func (s *Sandbox) teardown(ctx context.Context) error {
	err := s.end(ctx, remove)
	s.closeClient()
	return err
}

// Close releases what this handle holds without stopping the sandbox: it
// kills the background processes spawned through it (the sandbox forgets
// them), deletes its pooled toolbox sessions and closes its connections.
// The sandbox keeps running and another handle (or process) can connect to
// it by id. A closed handle must not be used again. An init this handle
// started stays this process's child: a goroutine reaps it when it ends.
func (s *Sandbox) Close(ctx context.Context) error {
	// No waitInits: the init keeps running, so waiting would only delay.
	err := s.mgr.Close(ctx)
	s.closeClient()
	return err
}

// Detach releases this handle as Close does, but leaves the background
// processes spawned through it running: any later handle, in this process
// or another, reaches them by id through its Processes (see
// sandbox.ProcessManager). A detached handle must not be used again.
func (s *Sandbox) Detach(ctx context.Context) error {
	err := s.mgr.Detach(ctx)
	s.closeClient()
	return err
}

func (s *Sandbox) closeClient() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.Close()
	}
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// waitInits waits (briefly) for the reapers of inits this process started.
func (s *Sandbox) waitInits() {
	s.mu.Lock()
	waits := s.waits
	s.waits = nil
	s.mu.Unlock()
	var keep []chan struct{}
	for _, w := range waits {
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			keep = append(keep, w)
		}
	}
	s.mu.Lock()
	s.waits = append(s.waits, keep...)
	s.mu.Unlock()
}

// identitySentence tells an agent who its commands run as: id, in a
// sandbox made of an image or not.
func identitySentence(id *sandbox.Identity, image bool) string {
	switch {
	case id.UID != 0 || id.GID != 0:
		return fmt.Sprintf("Commands run as the image's user %s (uid %d, gid %d), not root; HOME=%s.", id.User, id.UID, id.GID, id.Home)
	case image:
		return fmt.Sprintf("Commands run as user %s, uid 0: root of the sandbox's own user namespace with Docker's default capabilities inside it (unprivileged on the host); HOME=%s.", id.User, id.Home)
	}
	return fmt.Sprintf("Commands run as user %s, uid 0: root of the sandbox's own user namespace with no capabilities (unprivileged on the host); HOME=%s.", id.User, id.Home)
}
