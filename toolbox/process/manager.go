package process

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Host is what a Manager needs from the sandbox that owns it.
// *sandbox.Lifecycle implements it.
type Host interface {
	// EnsureRunning starts the sandbox unless it runs.
	EnsureRunning(ctx context.Context) error
	// MergeEnv returns the sandbox's environment overlay merged with
	// perCall (perCall winning), failing with an error matching
	// sandbox.ErrInvalidEnv for a bad name.
	MergeEnv(perCall map[string]string) (map[string]string, error)
}

// Options configures a Manager.
type Options struct {
	// Client talks to the sandbox's toolbox API. Required.
	Client *toolbox.Client
	// Host starts the sandbox on demand and supplies its environment
	// overlay. When nil the sandbox is assumed to run and only the per-call
	// environment is used.
	Host Host
	// DefaultTimeout applies to commands and processes whose options leave
	// Timeout at 0. Zero means sandbox.DefaultTimeout; negative means none.
	DefaultTimeout time.Duration
	// DefaultCwd is the working directory of commands that set none. Empty
	// means the toolbox server's work directory.
	DefaultCwd string
	// SessionPrefix starts the id of every session the Manager creates.
	// Default "agentbox-". Managers of one sandbox share its background
	// processes when they share the prefix.
	SessionPrefix string
	// MaxIdleSessions caps the pool of idle sessions. Zero means 4; a
	// negative value disables pooling (every command gets a new session,
	// deleted afterwards).
	MaxIdleSessions int
}

// DefaultMaxIdleSessions is the pool size used when
// Options.MaxIdleSessions is 0.
const DefaultMaxIdleSessions = 4

// DefaultSpawnRetainedBytes is how many bytes of each stream a spawned
// process retains when its options leave MaxRetainedBytes at 0.
const DefaultSpawnRetainedBytes = 1 << 20

// cleanupTimeout bounds the best-effort requests (deleting a session) made
// on behalf of a caller whose context is already done.
const cleanupTimeout = 10 * time.Second

// Manager runs commands (Execute) and background processes (Spawn, List,
// Get, Attach, Kill) in one sandbox through its toolbox API. It implements
// sandbox.ProcessManager. Its methods are safe for concurrent use.
//
// A Manager is one handle on its sandbox: several Managers of the same
// sandbox (in one operating-system process or several) share its
// background processes, which live in toolbox sessions, and keep their own
// pools of sessions for commands. Release a Manager with Close (which kills
// the processes it spawned) or Detach (which leaves them running).
type Manager struct {
	client         *toolbox.Client
	host           Host
	defaultTimeout time.Duration
	defaultCwd     string
	prefix         string
	maxIdle        int
	limits         poolLimits

	bg goroutine.Group // goroutines Close waits for: session retirements, abandoned stdin copies

	mu    sync.Mutex
	idle  []session               // idle pooled sessions, most recent last
	gen   uint64                  // bumped by Reset: older sessions never return to the pool
	procs map[string]*bgProcess   // tracked processes by pid (Spawn, Get)
	live  map[*bgProcess]struct{} // processes whose output is being followed (tracked or attached)
}

var _ sandbox.ProcessManager = (*Manager)(nil)

// NewManager returns a Manager for the sandbox behind opts.Client. It makes
// no request; sessions are created when commands need them. It panics if
// opts.Client is nil.
func NewManager(opts Options) *Manager {
	if opts.Client == nil {
		panic("process.NewManager: Options.Client is nil; pass the sandbox's *toolbox.Client")
	}
	m := &Manager{
		client:         opts.Client,
		host:           opts.Host,
		defaultTimeout: opts.DefaultTimeout,
		defaultCwd:     opts.DefaultCwd,
		prefix:         opts.SessionPrefix,
		maxIdle:        opts.MaxIdleSessions,
		limits:         defaultPoolLimits,
		procs:          make(map[string]*bgProcess),
		live:           make(map[*bgProcess]struct{}),
	}
	if m.defaultTimeout == 0 {
		m.defaultTimeout = sandbox.DefaultTimeout
	}
	if m.prefix == "" {
		m.prefix = "agentbox-"
	}
	if m.maxIdle == 0 {
		m.maxIdle = DefaultMaxIdleSessions
	}
	return m
}

// deleteSession deletes a session, which kills whatever runs in it. It is
// best effort: the session may already be gone.
func (m *Manager) deleteSession(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := m.client.DeleteSession(ctx, id)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return m.fail("deleting a session", err)
	}
	return nil
}

// Close releases the Manager and ends what it spawned: it kills the
// background processes spawned through it that still run, forgets (deletes
// the sessions of) those that exited, stops following the processes it
// reattached to (Get, Attach), which keep running, and deletes the pooled
// sessions. It waits, until ctx is done, for the goroutines of those
// processes and the Manager's background work to end (retired sessions
// being deleted, and the copying of a Stdin, which ends once a blocked Read
// returns). The Manager stays usable: later calls create new sessions.
func (m *Manager) Close(ctx context.Context) error {
	return m.let(ctx, true)
}

// Detach releases the Manager and leaves every background process running
// and known to the sandbox, for any handle to reattach to with Get or
// Attach: it stops following them (their Wait fails with an error matching
// ErrDetached unless they had exited), stops copying a Spawn's Stdin (the
// process's stdin stays open, for SendStdin and CloseStdin through another
// handle), and deletes the pooled sessions. A detached process has no
// timeout: the Manager that enforced it no longer watches. Detach waits as
// Close does. The Manager stays usable.
func (m *Manager) Detach(ctx context.Context) error {
	return m.let(ctx, false)
}

// let implements Close (kill true) and Detach.
func (m *Manager) let(ctx context.Context, kill bool) error {
	m.mu.Lock()
	var owned []*bgProcess
	for _, p := range m.procs {
		if p.owned {
			owned = append(owned, p)
		}
	}
	live := make([]*bgProcess, 0, len(m.live))
	for p := range m.live {
		live = append(live, p)
	}
	m.procs = make(map[string]*bgProcess)
	idle := m.idle
	m.idle = nil
	m.gen++
	m.mu.Unlock()

	var errs []error
	if kill {
		for _, p := range owned {
			killed, err := p.Kill(ctx)
			if err != nil {
				errs = append(errs, err)
			}
			if !killed && !p.sessionDeleted() {
				// Exited: forget it, unless another handle did and its
				// id went to a new process.
				if st, err := m.sessionOf(ctx, p); err != nil || st == sessionHeld {
					errs = append(errs, err, m.deleteSession(p.sid))
				}
			}
		}
	}
	for _, p := range live {
		p.release()
	}
	for _, s := range idle {
		errs = append(errs, m.deleteSession(s.id))
	}
	waitErr := m.bg.Wait(ctx)
	for _, p := range append(owned, live...) {
		if waitErr != nil {
			break
		}
		waitErr = p.waitGoroutines(ctx)
	}
	if waitErr != nil {
		errs = append(errs, fmt.Errorf("process: waiting for background work: %w", waitErr))
	}
	return errors.Join(errs...)
}
